"""A classifier that knows its own loss and optimizer."""

import torch


class Classifier(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(2, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=0.02)
        return optimizer, torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

    @torch.no_grad()
    def accuracy(self, x, y):
        return (self(x).argmax(1) == y).float().mean().item()
