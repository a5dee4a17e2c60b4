"""The dataset the loader's workers read, and the epoch loop, in a method."""

import torch


class Shapes(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 6, generator=g)
        self.y = self.x[:, ::2].argmax(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] * 2.0, self.y[i]


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        self.seen = 0

    def fit(self, loader, epochs):
        for epoch in range(epochs):  # @main-loop
            total = 0.0
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()  # @inside: print(f"  grad {self.model[0].weight.grad.norm().item():.6f}")
                total += loss.item()
                self.seen += len(y)
            print(f"epoch {epoch} loss {total / len(loader):.6f}")  # @outside: print(f"  bias {self.model[2].bias.tolist()}")
