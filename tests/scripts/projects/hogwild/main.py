"""Hogwild training started from the project's other file (PATTERNS 33 with multiprocessing):
workers.py shares the model and starts processes that each train it. flor cannot replay
that faithfully, and says so, naming workers.py's line."""

import torch
from workers import launch

torch.manual_seed(1)
model = torch.nn.Linear(3, 1)
launch(model, processes=2, steps=20)
print(f"weight {model.weight.detach().norm().item():.4f}")
