"""An entry script whose training loop, in engine.py, is not instrumented."""

import torch
from engine import fit

torch.manual_seed(12)
data = torch.randn(64, 4)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
fit(model, optimizer, data, 4)
print(f"final {model.weight.sum().item():.6f}")  # @outside: print(f"  bias {model.bias.item():.6f}")
