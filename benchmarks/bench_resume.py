"""Resuming a killed run costs the floor plus a restore, not the iterations before it.

    python benchmarks/bench_resume.py [--repeats 3] [--epochs 20] [--kill-after 12]

benchmarks/shapes/epoch_loop.py (an MLP epoch loop, about 0.3 s an epoch at one torch
thread) is recorded by ``flor run --resume`` and killed (SIGKILL) once it has printed epoch
``--kill-after``; the same command then resumes it. Interleaved, ``--repeats`` times: that
resume, a restart from scratch (a plain run of all epochs: what a job without flor does), and
the floor (a zero-epoch plain run: Python, torch, the data, the model). Reports medians, the
resume beside what it cannot beat (the floor plus the epochs left after its checkpoint, at
the plain run's pace), and whether every resumed run's output after its set-up ended the
plain run's output exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPE = ROOT / "benchmarks" / "shapes" / "epoch_loop.py"


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{args} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start, proc.stdout, proc.stderr


def killed_after(args: list[str], env: dict[str, str], cwd: Path, epoch: int) -> None:
    """Start ``args``; SIGKILL it once it printed epoch ``epoch`` (and a moment passed)."""
    proc = subprocess.Popen(
        [sys.executable, *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(f"epoch {epoch} "):
            time.sleep(0.3)
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--kill-after", type=int, default=12)
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-resume-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOR_")}
    env.update(FLOR_HOME=str(work / "home"), OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    (work / "train.py").write_text(SHAPE.read_text())
    epochs = str(opts.epochs)
    resumed, restart, floor, loop, points, exact = [], [], [], [], [], True
    for i in range(opts.repeats):  # interleaved: the host's drift falls on all alike
        command = ["-m", "flor.cli", "run", "--name", f"r{i}", "--resume", "train.py", epochs]
        killed_after(command, env, work, opts.kill_after)
        seconds, out, err = timed(command, env, work)
        resumed.append(seconds)
        points.append(int(re.search(r"checkpoint at iteration (\d+)", err).group(1)))
        seconds, plain, err = timed(["train.py", epochs], env, work)
        restart.append(seconds)
        loop.append(float(re.search(r"^loop ([0-9.]+) s$", err, re.MULTILINE).group(1)))
        floor.append(timed(["train.py", "0"], env, work)[0])
        tail = out[out.index("epoch ") :] if "epoch " in out else ""
        exact = exact and bool(tail) and plain.endswith(tail)
    at = statistics.median(points)
    floor_s, loop_s = statistics.median(floor), statistics.median(loop)
    bound = floor_s + loop_s * (opts.epochs - at - 1) / opts.epochs
    resumed_s = statistics.median(resumed)
    print(
        json.dumps(
            {
                "epochs": opts.epochs,
                "killed after epoch": opts.kill_after,
                "resumed from checkpoint at": at,
                "resume (s)": round(resumed_s, 2),
                "restart from scratch (s)": round(statistics.median(restart), 2),
                "floor (s)": round(floor_s, 2),
                "bound: floor + epochs left (s)": round(bound, 2),
                "resume over its bound": round(resumed_s / bound, 3),
                "exact": exact,
                "all": {"resume": resumed, "restart": restart, "floor": floor, "at": points},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
