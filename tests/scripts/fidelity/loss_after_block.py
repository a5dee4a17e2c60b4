"""A step loop whose forward feeds only the update (PATTERNS 7): the recorded block begins at
the forward. The hindsight edit prints the step's loss after the block, at every step: the
replay's block must still begin at the forward, as recorded, and restore `loss` from the
checkpoints instead of re-executing every step."""

import torch

torch.manual_seed(11)
data = torch.randn(400, 6)
model = torch.nn.Sequential(torch.nn.Linear(6, 24), torch.nn.Tanh(), torch.nn.Linear(24, 6))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(30):
    ix = torch.randint(len(data) - 1, (16,))
    x, y = data[ix], data[ix + 1]
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 9:
        print(f"step {step} w {model[0].weight.sum().item():.6f}")
    # @outside: print(f"  loss {loss.item():.6f}")
print("done")
