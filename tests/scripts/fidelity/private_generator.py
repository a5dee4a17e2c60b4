"""Noise from a private generator (`torch.Generator()`), which flor checkpoints like the global
streams. With `--clock`, the block reseeds it from the clock every epoch: no checkpoint can make
that deterministic, so a re-executed block drifts from the record, and `--verify` says so."""

import sys

import torch

torch.manual_seed(6)
noise = torch.Generator().manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(6):
    for i in range(4):
        if "--clock" in sys.argv and i == 0:
            noise.seed()  # a fresh, nondeterministic seed
        x = torch.randn(8, 4) + 0.1 * torch.rand(8, 4, generator=noise)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} done")  # @outside: print(f"  w {model.weight.sum().item():.6f}")
