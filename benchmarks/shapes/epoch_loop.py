"""An epoch loop with its batch loop inline (PATTERNS 2), unmodified (for `flor run`): an MLP
classifier on synthetic data through a shuffling DataLoader, Adam, an evaluation per epoch.

    python epoch_loop.py [epochs]
"""

import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
torch.manual_seed(0)
teacher = torch.nn.Linear(64, 10)
X = torch.randn(12800, 64)
y = teacher(X).argmax(1)
loader = DataLoader(TensorDataset(X[:11520], y[:11520]), batch_size=64, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
started = time.perf_counter()  # the loop's own time, on stderr: benchmarks/bench_overhead.py
for epoch in range(epochs):
    model.train()
    for data, target in loader:
        loss = F.cross_entropy(model(data), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        acc = (model(X[11520:]).argmax(1) == y[11520:]).float().mean().item()
    print(f"epoch {epoch} loss {loss.item():.4f} acc {acc:.4f}")
    # HINDSIGHT-SPARSE
print(f"loop {time.perf_counter() - started:.3f} s", file=sys.stderr)
