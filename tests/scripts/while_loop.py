"""A while loop driven through flor.it(lambda: condition); a flor.log value per iteration."""

import torch

import flor

torch.manual_seed(6)
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
step, max_steps = 0, 9
for _ in flor.it(lambda: step < max_steps):
    if flor.SkipBlock.step_into("update"):
        x = torch.randn(32, 3)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()  # @inside: print(f"  loss {loss.item():.5f}")
        step += 1
    model, opt, step, loss = flor.SkipBlock.end(model, opt, step, locals().get("loss", flor.UNBOUND))
    flor.log("loss", loss)
    print(f"step {step} loss {loss.item():.5f}")  # @outside: flor.log("bias", model.bias); print(f"  bias {model.bias.item():.6f}")
print("stopped at", step)
