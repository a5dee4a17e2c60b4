"""Record overhead by loop shape: what `flor run` adds to training, as flor measures it and as
wall clock, against the budget (epsilon, 1/15 by default).

Each shape (``benchmarks/shapes``) is an unmodified script that ``flor run`` instruments:
an epoch loop with an inline batch loop, a nanoGPT-shaped ``while True`` step loop, a
DQN-shaped environment step loop, a ``count()`` loop until the loss is small, and a step loop
over a persistent DataLoader iterator. One process run measures, interleaved, at 1 torch
thread, whole processes (python and torch start-up included), the median of the repeats:

- ``plain``: the script, as a user runs it;
- ``record``: ``flor run`` of it, which must print the same.

flor's figure is its own accounting (``run.json``: start-up, every checkpoint's copy and
write (on the training thread, or the writer thread's CPU time for a large one and for each
commit), its per-iteration bookkeeping, over the training time). Two wall-clock figures: the
loop's own time (each script prints it on stderr), which also pays for the writer thread's
share of this 2-core host and of the GIL; and the whole process, where
flor's start-up (torch imported while it instruments the script, no interpreter teardown)
can make a recorded run end sooner than a plain one.

    python benchmarks/bench_overhead.py [--shape NAME ...] [--repeats 3]
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

from bench_sparse import AS_USERS_RUN

HERE = Path(__file__).resolve().parent
SHAPES = {  # script, its arguments
    "epoch": ("epoch_loop.py", []),
    "nanogpt step": ("nanogpt_loop.py", ["1000"]),
    "dqn step": ("dqn_loop.py", ["10000"]),
    "count until converged": ("count_loop.py", []),
    "persistent iterator": ("iterator_loop.py", []),
}


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """The process's seconds, the loop's (its stderr line ``loop S s``), what it printed."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    loop = next(ln for ln in proc.stderr.splitlines() if ln.startswith("loop "))
    return seconds, float(loop.split()[1]), proc.stdout


def bench(shape: str, repeats: int, work: Path) -> dict[str, object]:
    script, args = SHAPES[shape]
    (work / script).write_text((HERE / "shapes" / script).read_text())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    for unset in ("FLOR_STORE", *AS_USERS_RUN):
        env.pop(unset, None)
    name = script.removesuffix(".py")
    plain_cmd = [sys.executable, script, *args]
    record_cmd = [sys.executable, "-m", "flor.cli", "run", "--name", name, script, *args]
    times: dict[str, list[tuple[float, float]]] = {"plain": [], "record": []}
    overheads = []
    for _ in range(repeats):
        *seconds, truth = timed(plain_cmd, env, work)
        times["plain"].append((seconds[0], seconds[1]))
        *seconds, out = timed(record_cmd, env, work)
        times["record"].append((seconds[0], seconds[1]))
        if out != truth:
            sys.exit(f"{shape}: the recording printed something else than the plain run")
        meta = json.loads(sorted((work / "home" / name).glob("*/run.json"))[-1].read_text())
        overheads.append(meta)

    def median(kind: str, part: int) -> float:
        return statistics.median(t[part] for t in times[kind])

    flor = statistics.median(m["overhead"] for m in overheads)
    last = overheads[-1]
    return {
        "shape": shape,
        "iterations": last["iterations"],
        "training (s)": round(last["compute_seconds"], 2),
        "checkpoints": [m["checkpoints"] for m in overheads],
        "overhead (flor)": f"{flor:.2%}",
        "overhead (loop wall)": f"{median('record', 1) / median('plain', 1) - 1:+.1%}",
        "overhead (process wall)": f"{median('record', 0) / median('plain', 0) - 1:+.1%}",
        "parts (last run, s)": {
            "start-up": last.get("setup_seconds"),
            "bookkeeping": last.get("bookkeeping_seconds"),
        },
        "budget": f"{last['epsilon']:.2%}",
        "loop seconds": {
            "plain": round(median("plain", 1), 2),
            "record": round(median("record", 1), 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        for shape in args.shape or list(SHAPES):
            result = bench(shape, args.repeats, Path(tmp))
            print(json.dumps(result), flush=True)
            results.append(result)
    out = HERE / "results" / "overhead.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
