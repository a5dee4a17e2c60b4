"""`flor replay` benchmark: parallel replay of a probed block, and `flor run`'s own cost.

    python benchmarks/bench_replay.py [--repeats 3] [--epochs 16] [--epoch-seconds 2] [--ray]

- Parallel replay: the workload (one torch thread, so that workers do not
  share cores) is recorded with `flor run`; a print is added *inside* the
  training loop, so every block is probed and re-executed. `flor replay
  --workers 2` vs `--workers 1`, side by side, alternating, medians; outputs
  must equal a full run of the edited script.
- With --ray, also `--workers 2 --backend ray`: against a Ray head started
  here with 2 CPUs (a running cluster: the per-task overhead), and with no
  address (Ray starts a local instance per replay, as on a laptop).
- `flor run` start-up: a one-iteration run under `flor run` vs the same
  script under `python` (both import torch); the difference is what
  instrumenting and starting flor add.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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


def start_ray_head(work: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """``ray start --head`` with 2 CPUs on a free port, as the tests do; (process, address)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env["RAY_AUTH_MODE"] = "disabled"  # loopback only; replays below inherit env
    log = work / "ray-head.log"
    with open(log, "wb") as out:
        head = subprocess.Popen(
            [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block"]
            + [
                "--num-cpus=2",
                f"--port={port}",
                "--include-dashboard=false",
                "--disable-usage-stats",
            ],
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,
        )
    while b"--block" not in log.read_bytes():
        if head.poll() is not None:
            raise SystemExit(log.read_text())
        time.sleep(0.2)
    return head, f"127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=16)
    ap.add_argument("--epoch-seconds", type=float, default=2.0)
    ap.add_argument("--ray", action="store_true", help="Also compare the Ray backend.")
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
        variants = {"workers_1": ["--workers", "1"], "workers_2": ["--workers", "2"]}
        head = start_ray_head(work, env) if args.ray else None
        if head is not None:
            ray = ["--workers", "2", "--backend", "ray"]
            variants.update(ray_2_running_head=[*ray, "--address", head[1]], ray_2_fresh=ray)
        times: dict[str, list[float]] = {k: [] for k in variants}
        try:
            for r in range(args.repeats):
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                for k in order:
                    seconds, out = timed(
                        [*flor, "replay", "--name", "bench", *variants[k]], env, work
                    )
                    if out != truth:
                        raise SystemExit(f"{k} printed something other than a full run")
                    times[k].append(seconds)
                    print(f"  {k}: {seconds:6.2f}s", file=sys.stderr)
        finally:
            if head is not None:
                os.killpg(head[0].pid, signal.SIGKILL)
                head[0].wait()
        one, two = times["workers_1"], times["workers_2"]
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
    for k in ("ray_2_running_head", "ray_2_fresh"):
        if times.get(k):
            results[f"{k}_s"] = med(times[k])
    if times.get("ray_2_running_head"):  # tasks run side by side: each pays the difference
        results["ray_overhead_per_task_s"] = med(times["ray_2_running_head"]) - med(two)
        results["ray_local_start_s"] = med(times["ray_2_fresh"]) - med(times["ray_2_running_head"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(
        f"parallel replay of a probed block: {results['workers_1_s']:.1f}s with 1 worker, "
        f"{results['workers_2_s']:.1f}s with 2 = {results['parallel_speedup']:.2f}x"
    )
    if "ray_overhead_per_task_s" in results:
        print(
            f"ray: {results['ray_2_running_head_s']:.1f}s with 2 tasks on a running head "
            f"(+{results['ray_overhead_per_task_s']:.2f}s per task over local workers), "
            f"{results['ray_2_fresh_s']:.1f}s when Ray starts a local instance"
        )
    print(
        f"flor run start-up: {results['flor_run_startup_s']:.2f}s vs python {results['python_startup_s']:.2f}s "
        f"= +{results['flor_run_added_s']:.2f}s for instrumenting and starting flor"
    )


if __name__ == "__main__":
    main()
