"""A loop that counts until the loss is small (PATTERNS 7: `itertools.count()` with a
data-dependent break), unmodified (for `flor run`): a tiny regression fitted one batch a step.

    python count_loop.py [target_loss]
"""

import itertools
import sys
import time

import torch
import torch.nn.functional as F

target = float(sys.argv[1]) if len(sys.argv) > 1 else 1e-5
torch.manual_seed(0)
w_true = torch.randn(512, 1) / 16
model = torch.nn.Linear(512, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
started = time.perf_counter()  # the loop's own time, on stderr: benchmarks/bench_overhead.py
for step in itertools.count():
    x = torch.randn(256, 512)
    loss = F.mse_loss(model(x), x @ w_true)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    # HINDSIGHT-EVERY
    if step % 500 == 0:
        print(f"step {step} loss {loss.item():.6f}")
        # HINDSIGHT-SPARSE
    if loss.item() < target:
        break
print(f"converged at step {step}")
print(f"loop {time.perf_counter() - started:.3f} s", file=sys.stderr)
