"""`flor replay` benchmark: parallel replay of a probed block, and `flor run`'s own cost.

    python benchmarks/bench_replay.py [--repeats 3] [--epochs 16] [--epoch-seconds 2]

- Parallel replay: the workload (one torch thread, so that workers do not
  share cores) is recorded with `flor run`; a print is added *inside* the
  training loop, so every block is probed and re-executed. `flor replay
  --workers 2` vs `--workers 1`, side by side, alternating, medians; outputs
  must equal a full run of the edited script.
- `flor run` start-up: a one-iteration run under `flor run` vs the same
  script under `python` (both import torch); the difference is what
  instrumenting and starting flor add.
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

WORKLOAD = Path(__file__).resolve().parent / "workload.py"
INSIDE = '        if _ == BATCHES - 1:\n            print(f"  last batch loss {loss.item():.5f}")'


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=16)
    ap.add_argument("--epoch-seconds", type=float, default=2.0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "replay.json"))
    args = ap.parse_args()
    py, flor = [sys.executable], [sys.executable, "-m", "flor.cli"]
    med = statistics.median
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "workload.py"
        script.write_text(WORKLOAD.read_text())
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOR_")}
        env.update(FLOR_HOME=str(work / "home"), THREADS="1", EPOCHS="1", BATCHES="200")

        startup_plain, startup_flor = [], []
        for _ in range(max(args.repeats, 5)):
            startup_plain.append(timed([*py, "workload.py"], {**env, "BATCHES": "1"}, work)[0])
            startup_flor.append(
                timed(
                    [*flor, "run", "--name", "tiny", "workload.py"], {**env, "BATCHES": "1"}, work
                )[0]
            )

        start = time.perf_counter()
        timed([*py, "workload.py"], env, work)
        probe = time.perf_counter() - start - med(startup_plain)
        batches = max(1, round(200 * args.epoch_seconds / max(probe, 1e-3)))
        env.update(EPOCHS=str(args.epochs), BATCHES=str(batches))
        print(
            f"calibrated: {batches} batches per epoch, {args.epochs} epochs, 1 thread",
            file=sys.stderr,
        )
        timed([*flor, "run", "--name", "bench", "workload.py"], env, work)
        script.write_text(WORKLOAD.read_text().replace("        # INSIDE", INSIDE))
        truth = timed([*py, "workload.py"], env, work)[1]
        one, two = [], []
        for r in range(args.repeats):
            for k in (1, 2) if r % 2 == 0 else (2, 1):
                seconds, out = timed(
                    [*flor, "replay", "--name", "bench", "--workers", str(k)], env, work
                )
                if out != truth:
                    raise SystemExit(f"--workers {k} printed something other than a full run")
                (one if k == 1 else two).append(seconds)
                print(f"  --workers {k}: {seconds:6.2f}s", file=sys.stderr)
    results = {
        "epochs": args.epochs,
        "batches_per_epoch": batches,
        "workers_1_s": med(one),
        "workers_2_s": med(two),
        "parallel_speedup": med(one) / med(two),
        "python_startup_s": med(startup_plain),
        "flor_run_startup_s": med(startup_flor),
        "flor_run_added_s": med(startup_flor) - med(startup_plain),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(
        f"parallel replay of a probed block: {results['workers_1_s']:.1f}s with 1 worker, "
        f"{results['workers_2_s']:.1f}s with 2 = {results['parallel_speedup']:.2f}x"
    )
    print(
        f"flor run start-up: {results['flor_run_startup_s']:.2f}s vs python {results['python_startup_s']:.2f}s "
        f"= +{results['flor_run_added_s']:.2f}s for instrumenting and starting flor"
    )


if __name__ == "__main__":
    main()
