"""InfiniteDataLoader style (PATTERNS 17, 31): a wrapper holding iter(DataLoader(...)) over a
RandomSampler(replacement=True, num_samples=10**10), advanced with next() in a `while` step
loop; its position must be checkpointed, not given up on."""

import torch
from torch.utils.data import DataLoader, RandomSampler, TensorDataset


class InfiniteDataLoader:
    def __init__(self, dataset, batch_size):
        sampler = RandomSampler(dataset, replacement=True, num_samples=10**10)
        self.train_iter = iter(DataLoader(dataset, batch_size=batch_size, sampler=sampler))

    def __next__(self):
        return next(self.train_iter)


torch.manual_seed(31)
xs = torch.randn(200, 4)
ys = xs.sum(1, keepdim=True)
loader = InfiniteDataLoader(TensorDataset(xs, ys), 16)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=0.02)
step = 0
while step < 30:
    x, y = next(loader)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.5f}")  # @outside: print(f"  x0 {x[0, 0].item():.5f} w {model[0].weight.sum().item():.5f}")
print("done", step)
