"""What a checkpoint costs the training thread (its stall) against a plain copy of what changed.

    python benchmarks/bench_stall.py [--widths 256 1024 2500] [--repeats 15] [--shapes]

The training thread's part of a checkpoint is ``Checkpointer.take``: the state walked and
copied (a tensor whose bits did not change is not copied again), and for a checkpoint of
at most 16 MB its serialization (``codec.prepare``); hashing and writing run on the
writer thread. Target: at most 2x a plain copy of the bytes that changed, plus 1 ms.

- For an MLP of each hidden width, after a real Adam step (parameters, gradients and both
  moments all change): ``take`` through a real writer and local store (the writer
  finishes between samples, untimed) against a plain ``clone`` of those tensors,
  interleaved, medians. Width 2500 holds about 100 MB.
- ``--shapes``: ``flor run`` of the DQN and nanoGPT step-loop shapes (``shapes/``), 1 torch
  thread, in a process that times (``inside.py``), at each checkpoint,
  ``Checkpointer.take`` beside a plain copy of what changed (in turn one before the other):
  a ``clone`` of each of the modules' parameters, buffers and gradients, the optimizers'
  state and the tensors in scope that is new or was written since the last checkpoint
  (autograd's version counter: a script's own copy of what changed), right where the
  loop's work left the caches. Also printed: one ``memcpy`` of the bytes a checkpoint
  wrote, from warm memory: not a copy a script could make of state spread over hundreds
  of tensors, but the physical figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from flor.runtime.checkpoints.checkpointer import Checkpointer
from flor.runtime.checkpoints.writer import BackgroundWriter
from flor.store import LocalStore

HERE = Path(__file__).resolve().parent
SHAPES = {"dqn": ("dqn_loop.py", "10000"), "nanogpt": ("nanogpt_loop.py", "1000")}


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    loss = model(torch.randn(64, 128)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def plain_copy(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Copies of what an Adam step changed: parameters, gradients, both moments."""
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = {
        i: {k: v.clone() for k, v in s.items()} for i, s in optimizer.state_dict()["state"].items()
    }
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return len(sd) + len(opt) + len(grads)


def mlp(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(128, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    )


def by_width(width: int, repeats: int, root: Path) -> str:
    model = mlp(width)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    writer = BackgroundWriter(lambda g, s: None, print)
    checkpointer = Checkpointer(LocalStore(root / f"w{width}"), "bench/r", writer)
    state = {"model": model, "optimizer": optimizer}
    times: dict[str, list[float]] = {"flor": [], "plain": []}
    train_step(model, optimizer)
    checkpointer.take(0, ("b", 0), (), state, sys._getframe())  # the first: every chunk hashed
    writer.flush()
    for r in range(repeats):
        for kind in ("flor", "plain") if r % 2 == 0 else ("plain", "flor"):
            train_step(model, optimizer)  # measured right after training, as in a real run
            start = time.perf_counter()
            if kind == "flor":
                checkpointer.take(r + 1, ("b", 0), (), state, sys._getframe())
            else:
                plain_copy(model, optimizer)
            times[kind].append(time.perf_counter() - start)
            writer.flush()
    writer.close()
    size = sum(p.numel() for p in model.parameters()) * 4 * 4 / 1e6  # params, grads, 2 moments
    return _line(f"width {width:5d}: {size:6.1f} MB changed", times["flor"], times["plain"])


def _line(what: str, stalls: list[float], copies: list[float]) -> str:
    f, p = statistics.median(stalls), statistics.median(copies)
    target = 2 * p + 1e-3
    verdict = "met" if f <= target else "NOT met"
    return (
        f"{what}: stall {f * 1e3:7.2f} ms, plain copy {p * 1e3:7.2f} ms ({f / p:.2f}x); "
        f"target 2x + 1 ms = {target * 1e3:.2f} ms: {verdict}"
    )


def by_shape(shape: str, root: Path) -> str:
    script, steps = SHAPES[shape]
    work = root / shape
    work.mkdir()
    (work / script).write_text((HERE / "shapes" / script).read_text())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    timings = work / "timings.jsonl"
    cmd = [
        sys.executable,
        str(HERE / "inside.py"),
        "stall",
        str(timings),
        "--",
        "run",
        "--name",
        shape,
    ]
    subprocess.run([*cmd, script, steps], cwd=work, env=env, check=True, capture_output=True)
    from flor import runs

    rows = [json.loads(line) for line in timings.read_text().splitlines()][1:]  # the first
    stalls, copies = [r["take"] for r in rows], [r["plain"] for r in rows]  # hashes every chunk
    run = runs.load_run(LocalStore(work / "home"), shape, None)
    added = statistics.median(c.bytes + c.new_blob_bytes for c in runs.checkpoints(run)[1:])
    what = f"{shape} ({len(rows) + 1} checkpoints, {added / 1e6:.2f} MB written each)"
    return f"{_line(what, stalls, copies)}; one memcpy of those bytes {_memcpy(added) * 1e3:.2f} ms"


def _memcpy(nbytes: float) -> float:
    source = np.random.default_rng(0).integers(0, 255, int(nbytes), dtype=np.uint8)
    copies = []
    for _ in range(31):
        start = time.perf_counter()
        source.copy()
        copies.append(time.perf_counter() - start)
    return statistics.median(copies)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 1024, 2500])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--shapes", action="store_true", help="also the DQN and nanoGPT shapes")
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="bench-stall-") as tmp:
        for width in args.widths:
            print(by_width(width, args.repeats, Path(tmp)), flush=True)
        for shape in SHAPES if args.shapes else ():
            print(by_shape(shape, Path(tmp)), flush=True)
    print(json.dumps({"torch threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
