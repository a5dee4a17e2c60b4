"""A step loop drawing batches from a persistent DataLoader iterator (PATTERNS 17, 31:
`data_iter = iter(loader)`, `next()`, a fresh iterator at StopIteration), unmodified (for
`flor run`): a small MLP, a log line every 100 steps.

    python iterator_loop.py [steps]
"""

import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
torch.manual_seed(0)
X = torch.randn(4096, 32)
y = (X.sum(1) > 0).long()
loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
started = time.perf_counter()  # the loop's own time, on stderr: benchmarks/bench_overhead.py
data_iter = iter(loader)
for step in range(steps):
    try:
        data, target = next(data_iter)
    except StopIteration:
        data_iter = iter(loader)
        data, target = next(data_iter)
    loss = F.cross_entropy(model(data), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    # HINDSIGHT-EVERY
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f}")
        # HINDSIGHT-SPARSE
print(f"loop {time.perf_counter() - started:.3f} s", file=sys.stderr)
