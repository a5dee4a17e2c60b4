"""Loaders that keep their own position: a shuffle drawn from a generator only the loader holds
(`generator=torch.Generator()...`), and a sampler that reshuffles by an epoch count it advances
itself as it is iterated (accelerate's prepared loaders do this). A block re-executed after a
restore must see the epoch's own order, which only the loader's position decides."""

import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset


class EpochShuffle(Sampler[int]):
    """Each pass a new order, seeded by how many passes came before."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def __iter__(self):
        order = torch.randperm(
            self.n, generator=torch.Generator().manual_seed(self.seed + self.epoch)
        )
        yield from order.tolist()
        self.epoch += 1

    def __len__(self) -> int:
        return self.n


torch.manual_seed(3)
x = torch.randn(48, 4)
y = x.sum(1, keepdim=True)
shuffled = DataLoader(
    TensorDataset(x, y), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(11)
)
by_epoch = DataLoader(TensorDataset(x, y), batch_size=8, sampler=EpochShuffle(48, seed=5))
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(6):
    for loader in (shuffled, by_epoch):
        for i, (xb, yb) in enumerate(loader):
            loss = ((model(xb) - yb) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            # @inside: if epoch == 3 and i == 0: print(f"  first batch {xb.sum().item():.6f}")
    print(f"epoch {epoch} loss {loss.item():.6f}")  # @outside: print(model.weight.sum().item())
