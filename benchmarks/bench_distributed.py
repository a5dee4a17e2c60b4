"""What flor costs a torchrun job, recording and replaying in step.

A DistributedDataParallel step loop (2 processes, gloo, CPU, one torch thread each) is run
plainly under torchrun, recorded with `flor run` under torchrun, and replayed under torchrun
with a print added in the loop's periodic branch (every 200 steps, on rank 0): a sparse replay,
in which both ranks run the steps rank 0 needs. The script times its own loop on rank 0, so python,
torch and torchrun start-up do not count; the whole-process time is reported beside it, with
the floor (the same job with zero steps). Runs are interleaved; medians of the repeats.

    python benchmarks/bench_distributed.py [--steps 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import sys, time
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

def main():
    steps = int(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for step in range(steps):
        x = torch.randn(32, 32)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 200 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.5f}")
            # OUTSIDE
    if rank == 0:
        print(f"loop {time.perf_counter() - start:.4f}", file=sys.stderr)
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
"""
OUTSIDE = 'print(f"  bias {model.module[2].bias.item():.6f}")'


def launch(work: Path, *args: str) -> tuple[float, float | None, str]:
    """Whole-process seconds, the loop's own (None: it did not say), and what rank 0
    printed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
    ]
    start = time.perf_counter()
    out = subprocess.run(
        [*torchrun, *args], cwd=work, env=env, capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - start
    loops = [float(line.split()[1]) for line in out.stderr.splitlines() if line.startswith("loop ")]
    return wall, (loops[0] if loops else None), out.stdout


def same_iterations_on_every_rank(work: Path) -> int:
    """The latest recording's checkpointed iterations, which must be the same on both ranks."""
    run = sorted(p for p in (work / "home" / "ddp").iterdir() if (p / "run.json").exists())[-1]
    ranks = [
        sorted(p.name for p in (j / "journal").glob("0*.json")) for j in (run, run / "ranks" / "1")
    ]
    assert ranks[0] == ranks[1], f"the ranks checkpointed different iterations: {ranks}"
    return len(ranks[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "train.py").write_text(SCRIPT)
        flor = ["-m", "flor.cli"]
        times: dict[str, list[tuple[float, float | None, str]]] = {}
        checkpoints = []
        for _ in range(a.repeats):
            (work / "train.py").write_text(SCRIPT)
            times.setdefault("plain", []).append(launch(work, "train.py", str(a.steps)))
            times.setdefault("floor", []).append(launch(work, "train.py", "0"))
            times.setdefault("record", []).append(
                launch(work, *flor, "run", "--name", "ddp", "train.py", str(a.steps))
            )
            checkpoints.append(same_iterations_on_every_rank(work))
            (work / "train.py").write_text(SCRIPT.replace("# OUTSIDE", OUTSIDE))
            times.setdefault("replay", []).append(launch(work, *flor, "replay", "--name", "ddp"))
        truth = launch(work, "train.py", str(a.steps))[2]
        assert all(out == truth for _, _, out in times["replay"]), "a replay printed otherwise"
        walls = {k: statistics.median(w for w, _, _ in v) for k, v in times.items()}
        loops = {
            k: statistics.median(s for _, s, _ in v if s is not None)
            for k, v in times.items()
            if any(s is not None for _, s, _ in v)
        }
    print(f"{a.steps} DDP steps, 2 processes, median of {a.repeats}")
    for kind in ("plain", "record", "replay"):
        loop = (
            f"loop {loops[kind]:.2f}s ({loops[kind] / loops['plain']:.2f}x plain)"
            if kind in loops
            else ""
        )
        print(
            f"  {kind:<7} process {walls[kind]:.2f}s ({walls[kind] / walls['plain']:.2f}x plain)  {loop}"
        )
    print(f"  floor   process {walls['floor']:.2f}s (the job with zero steps)")
    print(f"  checkpoints per record {checkpoints}, the same iterations on both ranks")
    print("  every replay printed what a full run of the edited script prints")


if __name__ == "__main__":
    main()
