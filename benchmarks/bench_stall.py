"""Training-thread time per checkpoint vs a plain in-memory copy, across state sizes.

    python benchmarks/bench_stall.py [--widths 256 1024 2048] [--repeats 30]

For an MLP of each hidden width, after a real training step (so Adam state and
gradients exist): flor's checkpoint capture (model and optimizer through their
state_dicts, gradients, train/eval flags, scope scan, RNG streams) vs a plain
copy of the same tensors, interleaved, medians. The training thread does
nothing else for a checkpoint: serializing and writing happen in the background.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from flor.runtime.state.capture import Snapshot, capture, capture_rng
from flor.runtime.state.kinds import stateful_in_scope


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    loss = model(torch.randn(64, 128)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def flor_capture(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """What the training thread does for one checkpoint of ``end(model=..., optimizer=...)``."""
    snap = Snapshot()
    named = {k: capture(v, snap) for k, v in (("model", model), ("optimizer", optimizer))}
    scope = {"model": model, "optimizer": optimizer}
    found = {k: capture(v, snap) for k, v in stateful_in_scope(scope).items()}
    return snap.nbytes + len(named) + len(found) + len(capture_rng())


def plain_copy(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = {
        i: {k: v.clone() for k, v in s.items()} for i, s in optimizer.state_dict()["state"].items()
    }
    grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    return len(sd) + len(opt) + len(grads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 1024, 2048])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    for width in args.widths:
        model = torch.nn.Sequential(
            torch.nn.Linear(128, width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, width),
            torch.nn.ReLU(),
            torch.nn.Linear(width, 10),
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        times: dict[str, list[float]] = {"flor": [], "plain": []}
        for r in range(args.repeats):
            for kind in ("flor", "plain") if r % 2 == 0 else ("plain", "flor"):
                train_step(model, optimizer)  # measured right after training, as in a real run
                start = time.perf_counter()
                (flor_capture if kind == "flor" else plain_copy)(model, optimizer)
                times[kind].append(time.perf_counter() - start)
        size = (
            sum(p.numel() for p in model.parameters()) * 4 * 4 / 1e6
        )  # params, grads, 2 Adam moments
        f, p = statistics.median(times["flor"]), statistics.median(times["plain"])
        print(
            f"width {width:5d}: state {size:6.1f} MB: flor {f * 1e3:7.2f} ms vs plain copy {p * 1e3:7.2f} ms = {f / p:.2f}x"
        )


if __name__ == "__main__":
    main()
