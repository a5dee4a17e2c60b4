"""The entry script takes the training step with `from engine import *` (PATTERNS 33): the
epoch loop is here, the batch loop in engine.py, which exports it through `__all__`."""

import torch
from engine import *  # noqa: F403

torch.manual_seed(11)
inputs = torch.randn(64, 5)
targets = inputs @ torch.randn(5, 1) + 0.1 * torch.randn(64, 1)
model = torch.nn.Linear(5, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(5):  # @main-loop
    loss = fit_epoch(model, optimizer, inputs, targets, batch_size=16)  # noqa: F405
    print(f"epoch {epoch} loss {loss:.6f}")  # @outside: print(f"  bias {model.bias.item():.6f} momentum {optimizer.state[model.weight]['momentum_buffer'].norm().item():.6f}")
print(f"final weight norm {model.weight.norm().item():.6f}")
