"""Builds the model and the trainer from a config."""

import torch
from trainer import Trainer


def build_trainer(cfg):
    model = torch.nn.Sequential(torch.nn.Linear(3, cfg["width"]), torch.nn.ReLU(), torch.nn.Linear(cfg["width"], 1))
    made = Trainer(model, lr=cfg["lr"], steps=cfg["steps"], log_every=cfg["log_every"])
    return made
