"""A step loop over freshly sampled batches."""

import torch


class Trainer:
    def __init__(self, model, lr, steps, log_every):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.steps = steps
        self.log_every = log_every
        self.last_loss = float("nan")

    def train(self):
        for step in range(self.steps):  # @main-loop
            x = torch.randn(16, 3)
            loss = (self.model(x) - x.prod(1, keepdim=True)).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()  # @inside: print(f"  grad {self.model[0].weight.grad.norm().item():.6f}")
            self.optimizer.step()
            self.last_loss = loss.item()
            if step % self.log_every == 0:
                print(f"step {step} loss {self.last_loss:.6f}")  # @outside: print(f"  bias {self.model[2].bias.item():.6f}")
