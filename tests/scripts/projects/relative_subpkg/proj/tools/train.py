"""A tool module run as `python -m proj.tools.train` (PATTERNS 33): it reaches the training
step with a two-level relative import, re-exported by the engine package's __init__."""

import torch

from .. import engine
from ..data import make_batches

torch.manual_seed(6)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, nesterov=True, momentum=0.8)
batches = make_batches(seed=6)
step = 0
for epoch in range(4):  # @main-loop
    loss, step = engine.train_epoch(model, optimizer, batches, step)
    print(f"epoch {epoch} loss {loss:.6f} step {step}")  # @outside: print(f"  out {model[2].bias.tolist()}")
