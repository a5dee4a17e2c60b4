"""Builds everything from the config and runs the epochs."""

import torch

from .steps import fit_epoch


def build(cfg):
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(3, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1))
    optimizer = torch.optim.RMSprop(model.parameters(), lr=cfg.lr)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.8)
    x = torch.linspace(-2, 2, 80)[:, None].repeat(1, 3)
    return model, optimizer, scheduler, (x, torch.sin(x[:, :1]))


def main(cfg):
    model, optimizer, scheduler, data = build(cfg)
    history = []
    for epoch in range(cfg.epochs):  # @main-loop
        loss = fit_epoch(model, optimizer, data)
        scheduler.step()
        history.append(loss)
        print(f"epoch {epoch} loss {loss:.6f}")  # @outside: print(f"  lr {scheduler.get_last_lr()[0]:.6f}")
    return history
