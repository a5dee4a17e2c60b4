"""A Trainer class: state on self, the loop in a method, the work in another (PATTERNS 1, 3, 10)."""

import torch


class Trainer:
    def __init__(self, epochs):
        torch.manual_seed(2)
        self.model = torch.nn.Linear(6, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.data = [(torch.randn(20, 6), torch.randn(20, 1)) for _ in range(5)]
        self.epochs = epochs
        self.global_step = 0
        self.losses = []

    def _run_epoch(self, epoch):
        for x, t in self.data:
            loss = torch.nn.functional.mse_loss(self.model(x), t)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.global_step += 1
        self.losses.append(round(loss.item(), 6))
        # @inside: print(f"  inside epoch {epoch}: last loss {loss.item():.6f}")

    def evaluate(self):
        with torch.no_grad():
            return sum(torch.nn.functional.mse_loss(self.model(x), t).item() for x, t in self.data)

    def fit(self):
        for epoch in range(self.epochs):
            self._run_epoch(epoch)
            print(
                f"epoch {epoch} step {self.global_step} eval {self.evaluate():.5f} losses {self.losses[-2:]}"
            )  # @outside: print(f"  w {self.model.weight.norm():.6f}")


if __name__ == "__main__":
    Trainer(epochs=6).fit()
