"""minGPT style: a persistent data iterator advanced with next() inside the step loop (PATTERNS 17): checkpointed with its position (a list iterator pickles with it)."""

import torch

torch.manual_seed(18)
data = [torch.randn(8, 4) for _ in range(40)]
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data_iter = iter(data)
for it in range(12):
    try:
        batch = next(data_iter)
    except StopIteration:
        data_iter = iter(data)
        batch = next(data_iter)
    loss = (model(batch) - batch).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"it {it} loss {loss.item():.5f}")  # @outside: print(f"  batch {batch.sum().item():.5f}")
