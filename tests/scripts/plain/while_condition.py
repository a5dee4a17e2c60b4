"""A `while step < max_steps` loop with no nested loop: one update per iteration (PATTERNS 7)."""

import torch

torch.manual_seed(12)
w = torch.nn.Parameter(torch.zeros(3))
opt = torch.optim.SGD([w], lr=0.1)
target = torch.tensor([1.0, -2.0, 0.5])
step, max_steps = 0, 10
while step < max_steps:
    x = torch.randn(8, 3)
    loss = ((x @ w - x @ target) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    print(
        f"step {step} loss {loss.item():.6f}"
    )  # @outside: print(f"  w {[round(v, 5) for v in w.tolist()]}")
print("final", [round(v, 4) for v in w.tolist()])
