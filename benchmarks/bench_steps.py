"""What flor costs per iteration of a long step loop, recording and replaying.

A hand-annotated step loop of N tiny updates (a fraction of a millisecond each) is
run plainly, recorded, and replayed with a print outside the block (blocks
restored where checkpointed) and with one inside it (every block re-executed).
The script times its own loop, so python and torch start-up do not count; the
per-iteration difference to the plain run is flor's own cost. Runs are
interleaved, at 1 torch thread, and the median of the repeats is reported.

    python benchmarks/bench_steps.py [--steps 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = """
import sys, time, types
import torch
import flor

steps = int(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
clock = types.SimpleNamespace(start=time.perf_counter())  # not a value replay restores
for _ in flor.it(range(steps)):
    if flor.SkipBlock.step_into("update"):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        # INSIDE
    model, opt, step = flor.SkipBlock.end(model, opt, step)
    if step % 1000 == 0:
        print(f"step {step} w {model.weight.sum().item():.6f}")
        # OUTSIDE
print(f"loop {time.perf_counter() - clock.start:.4f}", file=sys.stderr)
"""
EDITS = {
    "outside": ("# OUTSIDE", 'print(f"  b {model.bias.item():.6f}")'),
    "inside": ("# INSIDE", 'if step % 1000 == 0: print(f"  loss {loss.item():.6f}")'),
}


def loop_seconds(stderr: str) -> float:
    return float(next(line for line in stderr.splitlines() if line.startswith("loop ")).split()[1])


def run(work: Path, script: str, *args: str, epsilon: str | None = None) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    if epsilon:
        env["FLOR_EPSILON"] = epsilon
    proc = subprocess.run(
        [sys.executable, script, *args], cwd=work, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return loop_seconds(proc.stderr)


def edited(work: Path, kind: str | None) -> str:
    source = SCRIPT
    if kind:
        marker, line = EDITS[kind]
        source = source.replace(marker, line)
    path = work / f"steps_{kind or 'plain'}.py"
    path.write_text(source)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epsilon", default=None, help="record budget (default: flor's 1/15)")
    opts = parser.parse_args()
    n = str(opts.steps)
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        plain, outside, inside = edited(work, None), edited(work, "outside"), edited(work, "inside")
        for r in range(opts.repeats):
            name = f"steps{r}"
            times.setdefault("plain", []).append(run(work, plain, n))
            times.setdefault("record", []).append(
                run(work, plain, "--flor", name, n, epsilon=opts.epsilon)
            )
            times.setdefault("replay outside", []).append(
                run(work, outside, "--flor", name, "--replay_flor", n)
            )
            times.setdefault("replay inside", []).append(
                run(work, inside, "--flor", name, "--replay_flor", n)
            )
    base = statistics.median(times["plain"])
    result = {"steps": opts.steps, "plain_loop_seconds": round(base, 4)}
    print(f"{opts.steps} steps, plain loop {base:.3f} s ({base / opts.steps * 1e6:.1f} us/step)")
    for kind in ("record", "replay outside", "replay inside"):
        t = statistics.median(times[kind])
        per_step = (t - base) / opts.steps * 1e6
        print(f"{kind:<15} loop {t:.3f} s: {t / base:.2f}x plain, {per_step:+.1f} us/step")
        result[kind.replace(" ", "_")] = {"seconds": round(t, 4), "us_per_step": round(per_step, 2)}
    out = Path(__file__).parent / "results" / "steps.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
