"""What ``flor.it`` and one SkipBlock cost per iteration, on steps that do nothing else.

A hand-annotated loop of N empty steps (a counter, a model and optimizer carried by
``SkipBlock.end``, a print every 10,000 steps that the recording looks ahead for) runs
plainly and recorded. The script times every 1,000 steps itself; the median
of those stretches is the steady per-step figure, start-up and the loop's end left out
(the stretches with a journal entry are in it). Runs are interleaved, 1 torch thread.
On 100,000 steps the default budget affords a checkpoint in most stretches (the script's
start-up, spread over its loop, pays for them), so it also records with a budget that buys
only the first (``FLOR_EPSILON=0.005``): what an iteration that takes no checkpoint costs.
(The script's replay runs only the iterations its output needs, and prints the recording's
figures for the rest: what replay costs is bench_sparse's.)

Timings on a shared 2-core machine swing by a third from one minute to the next, so it also
counts what does not swing: the Python bytecodes flor's own frames execute per step (over
1,000 steps, traced), a figure a change to the hot path can be judged by exactly.

Then the same inside a real loop, where each hook runs cold between torch calls: the DQN
shape (``benchmarks/shapes/dqn_loop.py``, 10,000 steps, unmodified, ``flor run``): flor's
per-iteration bookkeeping as the recorder adds it to the run's ``bookkeeping_seconds``,
noted by iteration inside the recording (``inside.py``), over every iteration and over
those that took no checkpoint (a checkpoint's iteration decides, and its turn hands the
writer its commit: the more checkpoints, the higher the first figure), and the checkpoints
the default budget bought beside it.

    python benchmarks/bench_step_cost.py [--steps 100000] [--repeats 3] [--dqn-repeats 3]

(0 repeats: that part left out.)
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

FREE_EPSILON = "0.005"  # a budget that buys the empty loop no checkpoint but the first
SCRIPT = """
import os, sys, time, statistics
import torch
import flor

steps = int(sys.argv[1])
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
marks = []
ops = [0]

def tracer(frame, event, arg):  # flor's frames only: their bytecodes, one by one
    if os.sep + "flor" + os.sep not in frame.f_code.co_filename:
        return None
    frame.f_trace_opcodes = True
    def count(frame, event, arg):
        ops[0] += event == "opcode"
        return count
    return count

traced = os.environ.get("STEP_COST_TRACE") == "1"
for _ in flor.it(range(steps)):
    if step % 1000 == 0:
        marks.append(time.perf_counter())
    if traced and step in (steps // 2, steps // 2 + 1000):
        sys.settrace(tracer if step == steps // 2 else None)
    if flor.SkipBlock.step_into("update"):
        step += 1
    model, opt, step = flor.SkipBlock.end(model, opt, step)
    if step % 10000 == 0:
        print(step)
stretches = [(b - a) / 1000 * 1e6 for a, b in zip(marks[1:], marks[2:])]
print(f"per-step {statistics.median(stretches):.3f}", file=sys.stderr)
if traced:
    print(f"bytecodes {ops[0] / 1000:.1f}", file=sys.stderr)
"""


def per_step(
    work: Path, *args: str, figure: str = "per-step", traced: bool = False, epsilon: str = ""
) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    env["STEP_COST_TRACE"] = "1" if traced else ""
    if epsilon:
        env["FLOR_EPSILON"] = epsilon
    cmd = [sys.executable, str(work / "steps.py"), *args]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith(f"{figure} "))
    return float(line.split()[1])


def dqn_bookkeeping(work: Path, repeats: int) -> None:
    """Per-iteration bookkeeping of ``repeats`` recordings: flor's own figure (every
    iteration's), and that of the iterations that took no checkpoint, apart."""
    here = Path(__file__).parent
    shape, inside = here / "shapes" / "dqn_loop.py", str(here / "inside.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "dqn-home")}
    rows = []
    for r in range(repeats):
        out = work / f"dqn-{r}.json"
        cmd = [sys.executable, inside, "bookkeeping", str(out), "--", "run", "--name", "dqn"]
        proc = subprocess.run([*cmd, str(shape)], cwd=work, env=env, capture_output=True)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr.decode())
        rows.append(json.loads(out.read_text()))
    every, without = [r["every"] for r in rows], [r["without"] for r in rows]
    print(
        f"DQN shape (10,000 steps): bookkeeping {statistics.median(every):.2f} us/step "
        f"({', '.join(f'{t:.2f}' for t in every)}); in the iterations without a checkpoint "
        f"{statistics.median(without):.2f} ({', '.join(f'{t:.2f}' for t in without)}); "
        f"checkpoints {[r['checkpoints'] for r in rows]}"
    )


def empty_steps(steps: int, repeats: int) -> None:
    """Per-step time of the empty loop, plain and recorded, and the bytecodes."""
    n = str(steps)
    times: dict[str, list[float]] = {"plain": [], "record": [], "free": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "steps.py").write_text(SCRIPT)
        for r in range(repeats):
            times["plain"].append(per_step(work, n))
            times["record"].append(per_step(work, "--flor", f"s{r}", n))
            times["free"].append(per_step(work, "--flor", f"f{r}", n, epsilon=FREE_EPSILON))
        counted = per_step(work, "--flor", "t", n, figure="bytecodes", traced=True)
    plain = statistics.median(times["plain"])
    print(f"{steps} empty steps: plain {plain:.2f} us/step")
    t = statistics.median(times["record"])
    print(f"record {t:.2f} us/step: flor's own {t - plain:.2f} us/step, {counted:.0f} bytecodes")
    free = statistics.median(times["free"])
    print(f"record, no checkpoint but the first: flor's own {free - plain:.2f} us/step")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dqn-repeats", type=int, default=3)
    opts = parser.parse_args()
    if opts.repeats:
        empty_steps(opts.steps, opts.repeats)
    if opts.dqn_repeats:
        with tempfile.TemporaryDirectory() as tmp:
            dqn_bookkeeping(Path(tmp), opts.dqn_repeats)


if __name__ == "__main__":
    main()
