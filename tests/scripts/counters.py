"""Counters, running averages and last-batch values rebound inside the block."""

import torch

import flor

torch.manual_seed(4)
w = torch.zeros(5, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
target = torch.arange(5.0)
global_step = 0
running = 0.0
for epoch in flor.it(range(6)):
    if flor.SkipBlock.step_into("fit"):
        for i in range(10):
            x = torch.randn(5)
            last_loss = ((w * x - target * x) ** 2).mean()
            opt.zero_grad()
            last_loss.backward()
            opt.step()
            global_step += 1
            running = 0.9 * running + 0.1 * last_loss.item()
        # @inside: print(f"  inner i={i} x0={x[0].item():.5f}")
    w, opt, global_step, running, last_loss = flor.SkipBlock.end(
        w, opt, global_step, running, locals().get("last_loss", flor.UNBOUND)
    )
    print(f"epoch {epoch} step {global_step} running {running:.5f} last {last_loss.item():.5f}")  # @outside: print(f"  w {[round(v, 4) for v in w.tolist()]}")
