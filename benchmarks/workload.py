"""Benchmark workload: an MLP classifier on synthetic data, as a user writes it (no flor in it).

Sized by BATCHES (set by the benchmarks from a measured calibration) and
EPOCHS; THREADS sets torch's thread count. Prints one line per epoch on stdout;
on stderr, the training loop's wall time and the median cost of a plain
in-memory copy of the state a checkpoint holds (model, optimizer state,
gradients), taken right after the training each epoch, where flor takes its
copy: the stall baseline. Plain and recorded runs both pay for that copy.
"""

import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

EPOCHS = int(os.environ.get("EPOCHS", "20"))
BATCHES = int(os.environ.get("BATCHES", "100"))
if os.environ.get("THREADS"):
    torch.set_num_threads(int(os.environ["THREADS"]))

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(128, 256),
    torch.nn.ReLU(),
    torch.nn.Linear(256, 256),
    torch.nn.ReLU(),
    torch.nn.Linear(256, 10),
)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
teacher = torch.nn.Linear(128, 10)
X_val = torch.randn(512, 128)
y_val = teacher(X_val).argmax(1)


def plain_copy():
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = {
        i: {k: v.clone() for k, v in s.items()} for i, s in optimizer.state_dict()["state"].items()
    }
    grads = [p.grad.clone() for p in model.parameters()]
    return sd, opt, grads


copies = []
start = time.perf_counter()
for epoch in range(EPOCHS):
    model.train()
    for _ in range(BATCHES):
        x = torch.randn(256, 128)
        with torch.no_grad():
            y = teacher(x).argmax(1)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # INSIDE
    t = time.perf_counter()
    plain_copy()
    copies.append(time.perf_counter() - t)
    model.eval()
    with torch.no_grad():
        acc = (model(X_val).argmax(1) == y_val).float().mean().item()
    print(f"epoch {epoch} val acc {acc:.4f}")  # HINDSIGHT
loop = time.perf_counter() - start
print(
    f"loop_seconds={loop:.4f} plain_copy_seconds={statistics.median(copies):.6f}", file=sys.stderr
)
