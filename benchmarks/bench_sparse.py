"""Replay against re-running, on step loops: the nanoGPT shape and the DQN shape.

Each shape (``benchmarks/shapes``) is an unmodified script that ``flor run`` instruments.
One process run measures, interleaved, at 1 torch thread, whole processes (python and
torch start-up included):

- ``floor``: the script with zero iterations, what no replay can beat;
- ``plain``: the script, as a user runs it (``record``'s baseline);
- ``record``: ``flor run`` of it;
- ``sparse``: ``flor replay`` with a hindsight print inside the loop's periodic branch;
- ``every`` / ``every x2``: a print at every step, replayed with 1 and with 2 workers;
- ``rerun sparse`` / ``rerun every``: the edited script run in full, what a replay saves
  the user from, and each replay's baseline.

Every replay's output is checked against the full run of its edited script. The scripts run
with ``PYTHONUNBUFFERED`` unset, as users run them (set, each of the every-step edit's 10,000
prints is a write of its own, on both sides).

    python benchmarks/bench_sparse.py [--shape nanogpt|dqn] [--steps N] [--repeats 3]
                                      [--storage 20MB]
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

HERE = Path(__file__).resolve().parent
SHAPES = {
    "nanogpt": (
        "nanogpt_loop.py",
        2000,
        '        print(f"  hindsight weight norm {sum(p.norm() ** 2 for p in model.parameters()).sqrt():.4f}")',
        '    print(f"  iter {iter_num} loss {loss.item():.4f}")',
    ),
    "dqn": (
        "dqn_loop.py",
        10000,
        '        print(f"  hindsight q {q_net(torch.from_numpy(obs)).max().item():.5f}")',
        '    print(f"  step {global_step} return {episode_return:.3f}")',
    ),
}


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return seconds, proc.stdout


def bench(shape: str, steps: int | None, repeats: int, storage: str | None) -> dict[str, object]:
    script, default_steps, sparse_line, every_line = SHAPES[shape]
    n = str(steps or default_steps)
    work = Path(tempfile.mkdtemp(prefix=f"bench-sparse-{shape}-"))
    source = (HERE / "shapes" / script).read_text()
    (work / "train.py").write_text(source)
    (work / "sparse.py").write_text(source.replace("        # HINDSIGHT-SPARSE", sparse_line))
    (work / "every.py").write_text(source.replace("    # HINDSIGHT-EVERY", every_line))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    for unset in ("FLOR_STORE", "FLOR_RESTORE", "PYTHONUNBUFFERED"):
        env.pop(unset, None)
    if storage:
        env["FLOR_STORAGE"] = storage
    py, flor = sys.executable, [sys.executable, "-m", "flor.cli"]
    truth: dict[str, str] = {}
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        plan = {
            "floor": [py, "train.py", "0"],
            "plain": [py, "train.py", n],
            "rerun sparse": [py, "sparse.py", n],
            "rerun every": [py, "every.py", n],
            "record": [*flor, "run", "--name", shape, "train.py", n],
            "sparse": [*flor, "replay", "--name", shape, "sparse.py", n],
            "every": [*flor, "replay", "--name", shape, "every.py", n],
            "every x2": [*flor, "replay", "--name", shape, "--workers", "2", "every.py", n],
        }
        for label, cmd in plan.items():
            seconds, out = timed(cmd, env, work)
            if label.startswith("rerun "):
                truth[label.split()[1]] = out
            elif label.split()[0] in truth and out != truth[label.split()[0]]:
                sys.exit(f"{shape}: the {label} replay printed something else than a full run")
            runs.setdefault(label, []).append(seconds)
    med = {k: statistics.median(v) for k, v in runs.items()}
    meta = json.loads(sorted((work / "home" / shape).glob("*/run.json"))[-1].read_text())
    return {
        "shape": shape,
        "steps": int(n),
        "seconds": {k: round(v, 2) for k, v in med.items()},
        "record overhead (wall)": f"{med['record'] / med['plain'] - 1:+.1%}",
        "record overhead (flor)": f"{meta['overhead']:.2%}",
        "checkpoints": meta["checkpoints"],
        "kept (storage budget)": f"{meta['checkpoints'] - meta.get('thinned', 0)} "
        f"({meta.get('storage_budget')}, {meta['stored_bytes'] / 1e6:.1f} MB stored)",
        "sparse speedup": round(med["rerun sparse"] / med["sparse"], 2),
        "sparse above floor (s)": round(med["sparse"] - med["floor"], 2),
        "sparse bound (floor)": round(med["rerun sparse"] / med["floor"], 2),
        "every-step speedup, 1 worker": round(med["rerun every"] / med["every"], 2),
        "every-step speedup, 2 workers": round(med["rerun every"] / med["every x2"], 2),
        "every-step bound, 2 workers (floor)": round(
            med["rerun every"] / (med["floor"] + (med["rerun every"] - med["floor"]) / 2), 2
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storage", help="the recording's storage budget (FLOR_STORAGE)")
    args = parser.parse_args()
    for shape in args.shape or sorted(SHAPES):
        result = bench(shape, args.steps, args.repeats, args.storage)
        print(json.dumps(result, indent=2), flush=True)


if __name__ == "__main__":
    main()
