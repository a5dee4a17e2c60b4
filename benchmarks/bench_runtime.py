"""Runtime benchmark: record overhead, checkpoint stall, and replay speedup.

    python benchmarks/bench_runtime.py [--repeats 3] [--epochs 20] [--epoch-seconds 1.5]

Everything runs side by side in one invocation, interleaved, medians over
repeats, on benchmarks/workload.py sized so that an epoch takes about
--epoch-seconds on this machine:

- record overhead: ``flor run --name NAME workload.py`` vs ``python workload.py``,
  run back to back in pairs (order alternating); the median over pairs of each
  pair's ratio, for the training loop's wall time (flor's final flush included)
  and for the process's CPU time (the writer thread's work included). Pairing
  cancels the slow drift in machine speed seen here (identical runs vary 20%);
- stall: training-thread seconds per checkpoint (from the run's metadata) vs a
  plain in-memory copy of the same state (model, optimizer state, gradients);
- replay: a hindsight print added outside the block, ``flor replay`` vs a full
  run of the edited script, whole-process wall time; outputs must be identical.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = Path(__file__).resolve().parent / "workload.py"
HINDSIGHT = '    print(f"  hindsight: grad norm {model[0].weight.grad.norm():.5f}")'


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(
    script: Path, *flor_args: str, env: dict[str, str]
) -> tuple[float, float, str, float, float]:
    """(process seconds, loop seconds, stdout, plain-copy seconds, process CPU seconds).

    With ``flor_args`` (``run --name X`` / ``replay --name X``) the script runs under flor.
    """
    python = [sys.executable]
    command = (
        [*python, "-m", "flor.cli", *flor_args, str(script)]
        if flor_args
        else [*python, str(script)]
    )
    start, cpu = time.perf_counter(), _children_cpu()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    cpu = _children_cpu() - cpu
    m = re.search(r"loop_seconds=([\d.]+) plain_copy_seconds=([\d.]+)", proc.stderr)
    if not m:
        raise SystemExit(f"{script.name} {flor_args}: no timing line:\n{proc.stderr}")
    return wall, float(m.group(1)), proc.stdout, float(m.group(2)), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=16)
    ap.add_argument("--epoch-seconds", type=float, default=2.5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "runtime.json"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOR_")}
        env.update(FLOR_HOME=str(Path(tmp) / "home"), EPOCHS="1", BATCHES="200")
        probe = run(WORKLOAD, env=env)[1]
        batches = max(1, round(200 * args.epoch_seconds / probe))
        env.update(EPOCHS=str(args.epochs), BATCHES=str(batches))
        print(f"calibrated: {batches} batches per epoch, {args.epochs} epochs", file=sys.stderr)

        plain, record = [], []
        for r in range(args.repeats):
            pair = [("plain", ()), ("record", ("run", "--name", "bench"))]
            for kind, flags in pair if r % 2 == 0 else pair[::-1]:
                result = run(WORKLOAD, *flags, env=env)
                (plain if kind == "plain" else record).append(result)
                print(
                    f"  {kind:<7} loop {result[1]:7.2f}s  process {result[0]:7.2f}s  cpu {result[4]:7.2f}s",
                    file=sys.stderr,
                )
        if any(p[2] != r[2] for p, r in zip(plain, record)):
            raise SystemExit("recording changed the workload's output")

        home = Path(env["FLOR_HOME"]) / "bench"
        metas = [json.loads((d / "run.json").read_text()) for d in sorted(home.iterdir())]
        stalls = [s for m in metas for s in m["stall_seconds"]]
        plain_copy = statistics.median(p[3] for p in plain)

        edited = Path(tmp) / "workload.py"
        edited.write_text(WORKLOAD.read_text().replace("  # HINDSIGHT", "\n" + HINDSIGHT))
        full, replay = [], []
        for _ in range(args.repeats):
            full.append(run(edited, env=env))
            replay.append(run(edited, "replay", "--name", "bench", env=env))
            print(
                f"  full re-run {full[-1][0]:7.2f}s  replay {replay[-1][0]:7.2f}s", file=sys.stderr
            )
        if any(f[2] != r[2] for f, r in zip(full, replay)):
            raise SystemExit("replay printed something other than the full re-run")

    med = statistics.median
    results = {
        "epochs": args.epochs,
        "batches_per_epoch": batches,
        "repeats": args.repeats,
        "plain_loop_s": med(p[1] for p in plain),
        "record_loop_s": med(r[1] for r in record),
        "record_overhead_loop": med(r[1] / p[1] for p, r in zip(plain, record)) - 1,
        "record_overhead_cpu": med(r[4] / p[4] for p, r in zip(plain, record)) - 1,
        "record_overhead_loop_range": [
            min(r[1] / p[1] for p, r in zip(plain, record)) - 1,
            max(r[1] / p[1] for p, r in zip(plain, record)) - 1,
        ],
        "flor_reported_overhead": med(m["overhead"] for m in metas),
        "checkpoints_per_run": med(m["checkpoints"] for m in metas),
        "checkpoint_mb": med(m["checkpoint_bytes"] for m in metas)
        / max(1, med(m["checkpoints"] for m in metas))
        / 1e6,
        "stall_s": med(stalls),
        "plain_copy_s": plain_copy,
        "stall_ratio": med(stalls) / plain_copy,
        "full_rerun_s": med(f[0] for f in full),
        "replay_s": med(r[0] for r in replay),
        "replay_speedup": med(f[0] for f in full) / med(r[0] for r in replay),
        "replay_loop_s": med(r[1] for r in replay),
        "replay_loop_speedup": med(f[1] for f in full) / med(r[1] for r in replay),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    lo, hi = results["record_overhead_loop_range"]
    print(
        f"record overhead:  {results['record_overhead_loop']:+.2%} training loop wall time "
        f"(pairs ranged {lo:+.2%} to {hi:+.2%}), {results['record_overhead_cpu']:+.2%} process CPU time "
        f"(flor's own estimate {results['flor_reported_overhead']:.2%}; "
        f"{results['checkpoints_per_run']:.0f} checkpoints of {results['checkpoint_mb']:.1f} MB per run)"
    )
    print(
        f"stall:            {results['stall_s'] * 1e3:.2f} ms per checkpoint vs {plain_copy * 1e3:.2f} ms "
        f"plain copy = {results['stall_ratio']:.2f}x"
    )
    print(
        f"replay:           {results['replay_s']:.2f}s vs full re-run {results['full_rerun_s']:.2f}s "
        f"= {results['replay_speedup']:.1f}x faster (training loop alone: "
        f"{results['replay_loop_speedup']:.0f}x; python+torch start-up is ~3 s of each)"
    )


if __name__ == "__main__":
    main()
