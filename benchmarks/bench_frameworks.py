"""Library trainers recorded and replayed: Lightning's ``Trainer.fit``, Hugging Face's
``Trainer.train``.

    python benchmarks/bench_frameworks.py [--repeats 3] [--only lightning|hf]

For each framework's epoch-shaped script (benchmarks/shapes/lightning_epochs.py, 16 epochs,
and hf_epochs.py, 6 epochs: about 20 s of training each at one torch thread), interleaved,
``--repeats`` times: a plain run and ``flor run`` (the loop's own wall time, which the script
writes to stderr), and the floor (a zero-epoch plain run of the same script: Python, torch,
the framework, the set-up). Then a hindsight print in the callback's validation or evaluation
hook, a full run of the edited script (the truth) and ``--repeats`` ``flor replay``s of it.
Reports medians: the record's overhead (recorded loop over plain loop, against the 6.67%
budget), the replay over the floor (the target: within 1.5x), and whether every replay
printed exactly what the full run printed.
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

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ROOT / "benchmarks" / "shapes"
CASES = {
    "lightning": (
        "lightning_epochs.py",
        "print(f\"  lr {trainer.optimizers[0].param_groups[0]['lr']:.6f} "
        'weight {module.net[0].weight.norm():.4f}")',
    ),
    "hf": (
        "hf_epochs.py",
        "print(f\"  lr {kwargs['lr_scheduler'].get_last_lr()[0]:.6g} "
        "weight {kwargs['model'].transformer.wte.weight.norm():.4f}\")",
    ),
}


def run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float | None, str]:
    """Wall seconds, the loop's own seconds (None: not written), and stdout of ``python ARGS``."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{args} failed:\n{proc.stderr[-3000:]}")
    loop = re.search(r"^loop ([0-9.]+) s$", proc.stderr, re.MULTILINE)
    return wall, float(loop.group(1)) if loop else None, proc.stdout


def framework(name: str, repeats: int) -> dict[str, object]:
    shape, line = CASES[name]
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOR_")}
    env.update(FLOR_HOME=str(work / "home"), OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    source = (SHAPES / shape).read_text()
    script = work / "train.py"
    script.write_text(source)
    plain, recorded, floor = [], [], []
    for _ in range(repeats):  # interleaved: the host's drift falls on both alike
        plain.append(run([str(script)], env, work)[1])
        recorded.append(run(["-m", "flor.cli", "run", "--name", "x", "train.py"], env, work)[1])
        floor.append(run([str(script), "0"], env, work)[0])
    script.write_text(source.replace("# HINDSIGHT", line))
    _, _, truth = run([str(script)], env, work)
    replays = [run(["-m", "flor.cli", "replay", "--name", "x"], env, work) for _ in range(repeats)]
    exact = all(out == truth for _, _, out in replays)
    plain_s = statistics.median(p for p in plain if p is not None)
    recorded_s = statistics.median(r for r in recorded if r is not None)
    floor_s = statistics.median(floor)
    replay_s = statistics.median(wall for wall, _, _ in replays)
    return {
        "framework": name,
        "training (s)": round(plain_s, 2),
        "recorded loop (s)": round(recorded_s, 2),
        "record overhead": f"{recorded_s / plain_s - 1:+.1%}",
        "floor (s)": round(floor_s, 2),
        "replay (s)": round(replay_s, 2),
        "replay / floor": round(replay_s / floor_s, 2),
        "replay exact": exact,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=sorted(CASES))
    args = parser.parse_args()
    rows = [framework(name, args.repeats) for name in CASES if args.only in (None, name)]
    for row in rows:
        print(json.dumps(row))
    out = ROOT / "benchmarks" / "results" / "frameworks.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
