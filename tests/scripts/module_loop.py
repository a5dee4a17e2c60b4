"""Module-level loop; dropout, a shuffled DataLoader and python/numpy randomness (RNG)."""

import random

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import flor

torch.manual_seed(1)
random.seed(1)
np.random.seed(1)
X = torch.randn(256, 16)
y = (X[:, :4].sum(1) > 0).long()
loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(32, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
print("data ready")

for epoch in flor.it(range(8)):
    model.train()
    if flor.SkipBlock.step_into("train"):
        for xb, yb in loader:
            noise = random.gauss(0, 0.01) + float(np.random.normal(0, 0.01))
            loss = F.cross_entropy(model(xb + noise), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        # @inside: print(f"  last batch loss {loss.item():.5f}")
    model, optimizer = flor.SkipBlock.end(model, optimizer)
    model.eval()
    probe = torch.rand(1).item() + random.random() + np.random.rand()  # RNG after the block
    with torch.no_grad():
        acc = (model(X).argmax(1) == y).float().mean().item()
    print(f"epoch {epoch} acc {acc:.4f} probe {probe:.6f}")  # @outside: print(f"  w0 {model[0].weight.norm():.6f} b3 {model[3].bias.tolist()}")
print("done")
