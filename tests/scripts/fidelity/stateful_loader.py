"""A step loop over a persistent torchdata StatefulDataLoader iterator with worker processes,
re-created when an epoch runs out (PATTERNS 17): its position is checkpointed through the
loader's own state protocol, not given up on."""

import torch
from torch.utils.data import TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader

torch.manual_seed(5)
xs = torch.randn(120, 4)
ys = xs.sum(1, keepdim=True)
loader = StatefulDataLoader(TensorDataset(xs, ys), batch_size=16, shuffle=True, num_workers=2)
train_iter = iter(loader)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(24):
    try:
        x, y = next(train_iter)
    except StopIteration:
        train_iter = iter(loader)
        x, y = next(train_iter)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 6 == 5:
        print(f"step {step} loss {loss.item():.5f}")  # @outside: print(f"  x0 {x[0, 0].item():.5f} w {model[0].weight.sum().item():.5f}")
print("done")
