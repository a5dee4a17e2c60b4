"""Arrays and tensors mutated in place in every way a script does, hand-annotated: in-place
ops, slices, writes through `.data` and through a numpy view (neither bumps the tensor's
version counter), `out=`, a resized tensor, a list of arrays that grows and shrinks, values
rebound. Each step mutates a few rows chosen at random, so consecutive checkpoints share most
chunks. A hindsight line after the block prints a digest of every value."""

import hashlib
import sys

import numpy as np
import torch

import flor

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
torch.manual_seed(3)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
table = torch.zeros(200, 128)  # 100 KB: stored as chunks
view = table.numpy()  # shares the table's memory
buffer = np.zeros((300, 64), dtype=np.float32)
counts = np.zeros(40000, dtype=np.int16)
columns = np.zeros((64, 300), dtype=np.float64, order="F")
rows = [np.zeros(20000, dtype=np.float32)]
holder = {"t": torch.zeros(30000), "grow": torch.zeros(20000, dtype=torch.int32)}


def digest(*values):
    h = hashlib.sha256()
    for v in values:
        a = v.clone().numpy() if isinstance(v, torch.Tensor) else v  # v stays resizable
        h.update(f"{a.dtype}{a.shape}{a.strides}".encode() + a.tobytes(order="A"))
    return h.hexdigest()[:16]


for step in flor.it(range(steps)):
    if flor.SkipBlock.step_into("train"):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        r = np.random.default_rng(step)
        i, j = (int(x) for x in r.integers(0, 200, size=2))
        for kind in r.permutation(10)[:4]:
            if kind == 0:
                table[i] += 1.0  # in place: bumps the version counter
            elif kind == 1:
                table.data[j, :5] = float(step)  # through .data: does not
            elif kind == 2:
                view[i, 3] = -0.0 if step % 2 else np.nan  # through numpy: does not
            elif kind == 3:
                torch.add(holder["t"][j : j + 10], 2.5, out=holder["t"][j : j + 10])
            elif kind == 4:
                buffer[(step * 7) % 300] = r.random(64, dtype=np.float32)
            elif kind == 5:
                np.add(counts[j : j + 50], 3, out=counts[j : j + 50])
            elif kind == 6:
                rows.append(np.full(20000, step, dtype=np.float32))
            elif kind == 7 and len(rows) > 1:
                rows.pop(0)[:] = -1  # mutated after it left the list: the list is what counts
            elif kind == 8:
                columns[:, i] = step
            elif kind == 9:
                holder["grow"].resize_(holder["grow"].numel() + 1000)
                holder["grow"][-1000:] = step
                holder["t"] = holder["t"] * 1  # rebound to a new tensor
    model, optimizer, table, buffer, counts, columns, rows, holder = flor.SkipBlock.end(
        model, optimizer, table, buffer, counts, columns, rows, holder
    )
    # @outside: print(step, digest(table, buffer, counts, columns, *rows, *holder.values()), len(rows))
print("done", digest(table, buffer, counts, columns, *rows, *holder.values()))
