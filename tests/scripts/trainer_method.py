"""Loop in a method; model, optimizer, step counter and history live on self."""

import torch

import flor


class Trainer:
    def __init__(self):
        torch.manual_seed(3)
        self.model = torch.nn.Linear(8, 1)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.05)
        self.data = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(6)]
        self.step = 0
        self.history = []

    def train_one_epoch(self):
        total = 0.0
        for x, t in self.data:
            loss = torch.nn.functional.mse_loss(self.model(x), t)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.step += 1
            total += loss.item()
        self.history.append(round(total, 6))

    def fit(self, epochs):
        for epoch in flor.it(range(epochs)):
            if flor.SkipBlock.step_into("epoch"):
                self.train_one_epoch()  # @inside: print(f"  steps {self.step}")
            flor.SkipBlock.end(self)
            print(f"epoch {epoch} step {self.step} history {self.history[-2:]}")  # @outside: print(f"  weight {self.model.weight.sum().item():.6f} lr {self.optimizer.param_groups[0]['lr']}")


if __name__ == "__main__":
    Trainer().fit(6)
