"""Replay against re-running, on the loop shapes of PATTERNS.md section D: the nanoGPT step
loop, the DQN step loop, the epoch loop, a ``count()`` loop until converged and a step loop
over a persistent DataLoader iterator.

Each shape (``benchmarks/shapes``) is an unmodified script that ``flor run`` instruments.
One process run measures, interleaved, at 1 torch thread, whole processes (python and
torch start-up included):

- ``floor``: the script with zero iterations (the count loop: one), what no replay can beat;
- ``plain``: the script, as a user runs it (``record``'s baseline);
- ``record``: ``flor run`` of it;
- ``sparse``: ``flor replay`` with a hindsight print inside the loop's periodic branch;
- ``every`` / ``every x2``: a print at every step, replayed with 1 and with 2 workers (not
  for the epoch loop, whose every iteration is its periodic work);
- ``rerun sparse`` / ``rerun every``: the edited script run in full, what a replay saves
  the user from, and each replay's baseline.

Every replay's output is checked against the full run of its edited script. The scripts run
with ``PYTHONUNBUFFERED`` and ``PYTHONDONTWRITEBYTECODE`` unset, as users run them
(``AS_USERS_RUN``).

    python benchmarks/bench_sparse.py [--shape nanogpt|dqn|epoch|count|iterator ...]
                                      [--steps N] [--repeats 3] [--storage 20MB]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# What this machine's shell sets and a user's does not: every write unbuffered (each of
# the every-step edit's 10,000 prints a write of its own, on both sides), and no bytecode
# cache (each flor process compiling flor's modules again: 40-70 ms charged to its start-up)
AS_USERS_RUN = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")
# script, its arguments for a full run and for the floor (no iterations, or one), the
# hindsight print for its loop's periodic branch (# HINDSIGHT-SPARSE) and for every step
# (# HINDSIGHT-EVERY; None: the loop's iterations are its periodic work, as epochs are)
SHAPES = {
    "nanogpt": (
        "nanogpt_loop.py",
        ("2000", "0"),
        'print(f"  hindsight weight norm {sum(p.norm() ** 2 for p in model.parameters()).sqrt():.4f}")',
        'print(f"  iter {iter_num} loss {loss.item():.4f}")',
    ),
    "dqn": (
        "dqn_loop.py",
        ("10000", "0"),
        'print(f"  hindsight q {q_net(torch.from_numpy(obs)).max().item():.5f}")',
        'print(f"  step {global_step} return {episode_return:.3f}")',
    ),
    "epoch": (
        "epoch_loop.py",
        ("20", "0"),
        'print(f"  hindsight weight norm {model[0].weight.norm():.5f}")',
        None,
    ),
    "count": (
        "count_loop.py",
        ("1e-5", "1e9"),  # the loss target: 1e9 stops after the first step
        'print(f"  hindsight weight norm {model.weight.norm():.6f}")',
        'print(f"  step {step} loss {loss.item():.6f}")',
    ),
    "iterator": (
        "iterator_loop.py",
        ("6000", "0"),
        'print(f"  hindsight weight norm {model[0].weight.norm():.5f}")',
        'print(f"  step {step} loss {loss.item():.4f}")',
    ),
}


def edited(source: str, marker: str, line: str) -> str:
    """``source`` with ``line`` in place of the comment ``# marker``, at its indentation."""
    return re.sub(rf"^( *)# {marker}$", lambda m: m.group(1) + line, source, flags=re.M)


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return seconds, proc.stdout


def bench(shape: str, steps: int | None, repeats: int, storage: str | None) -> dict[str, object]:
    script, (full, zero), sparse_line, every_line = SHAPES[shape]
    n = str(steps) if steps else full
    work = Path(tempfile.mkdtemp(prefix=f"bench-sparse-{shape}-"))
    source = (HERE / "shapes" / script).read_text()
    (work / "train.py").write_text(source)
    (work / "sparse.py").write_text(edited(source, "HINDSIGHT-SPARSE", sparse_line))
    if every_line:
        (work / "every.py").write_text(edited(source, "HINDSIGHT-EVERY", every_line))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    for unset in ("FLOR_STORE", "FLOR_RESTORE", *AS_USERS_RUN):
        env.pop(unset, None)
    if storage:
        env["FLOR_STORAGE"] = storage
    py, flor = sys.executable, [sys.executable, "-m", "flor.cli"]
    truth: dict[str, str] = {}
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        for label, cmd in _plan(py, flor, shape, n, zero, bool(every_line)).items():
            seconds, out = timed(cmd, env, work)
            if label.startswith("rerun "):
                truth[label.split()[1]] = out
            elif label.split()[0] in truth and out != truth[label.split()[0]]:
                sys.exit(f"{shape}: the {label} replay printed something else than a full run")
            runs.setdefault(label, []).append(seconds)
    med = {k: statistics.median(v) for k, v in runs.items()}
    meta = json.loads(sorted((work / "home" / shape).glob("*/run.json"))[-1].read_text())
    return {"shape": shape, "argument": n, **_figures(med, meta)}


def _plan(
    py: str, flor: list[str], shape: str, n: str, zero: str, every: bool
) -> dict[str, list[str]]:
    plan = {
        "floor": [py, "train.py", zero],
        "plain": [py, "train.py", n],
        "rerun sparse": [py, "sparse.py", n],
        "record": [*flor, "run", "--name", shape, "train.py", n],
        "sparse": [*flor, "replay", "--name", shape, "sparse.py", n],
    }
    if every:
        plan["rerun every"] = [py, "every.py", n]
        plan["every"] = [*flor, "replay", "--name", shape, "every.py", n]
        plan["every x2"] = [*flor, "replay", "--name", shape, "--workers", "2", "every.py", n]
    return plan


def _figures(med: dict[str, float], meta: dict[str, Any]) -> dict[str, object]:
    """Each replay against re-running, beside the bound the floor sets."""
    sparse, bound = med["rerun sparse"] / med["sparse"], med["rerun sparse"] / med["floor"]
    out: dict[str, object] = {
        "seconds": {k: round(v, 2) for k, v in med.items()},
        "record overhead (wall)": f"{med['record'] / med['plain'] - 1:+.1%}",
        "record overhead (flor)": f"{meta['overhead']:.2%}",
        "checkpoints": meta["checkpoints"],
        "kept (storage budget)": f"{meta['checkpoints'] - meta.get('thinned', 0)} "
        f"({meta.get('storage_budget')}, {meta['stored_bytes'] / 1e6:.1f} MB stored)",
        "sparse speedup": round(sparse, 2),
        "sparse above floor (s)": round(med["sparse"] - med["floor"], 2),
        "sparse bound (floor)": round(bound, 2),
        "sparse share of its bound": f"{sparse / bound:.0%}",
    }
    if "every" in med:
        rerun = med["rerun every"]
        out["every-step speedup, 1 worker"] = round(rerun / med["every"], 2)
        out["every-step speedup, 2 workers"] = round(rerun / med["every x2"], 2)
        out["every-step bound, 2 workers (floor)"] = round(
            rerun / (med["floor"] + (rerun - med["floor"]) / 2), 2
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append")
    parser.add_argument("--steps", type=int, help="the step shapes' steps (count: its target)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storage", help="the recording's storage budget (FLOR_STORAGE)")
    args = parser.parse_args()
    for shape in args.shape or sorted(SHAPES):
        result = bench(shape, args.steps, args.repeats, args.storage)
        print(json.dumps(result, indent=2), flush=True)


if __name__ == "__main__":
    main()
