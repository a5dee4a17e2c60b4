"""Replay fidelity and rerun share on the shapes of PATTERNS.md section D.

    python benchmarks/bench_fidelity.py [--epsilon 0.0667] [--records 2]

For each script in tests/scripts/fidelity (and the hand-annotated ones beside it): a
plain run, `flor run` (or `--flor`) under the default budget, the `# @outside:`
hindsight edit, then `flor replay`. It reports whether the replay printed exactly
what a full run of the edited script prints, and the share of the full run's
backward passes the replay executed (counted in-process by
tests/counting/sitecustomize.py), with wall times, at one torch thread; and the share
again with ``FLOR_RESTORE=always``: the record's coverage, where the replay itself runs a
block of a millisecond rather than restore it. ``--records 2``
records each script twice and replays the second run, as a script trained again is: a loop
of no length (``count()``) takes its start-up allowance's spread from the run before.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from bench_sparse import AS_USERS_RUN  # noqa: E402
from conftest import hindsight  # noqa: E402

SCRIPTS = ROOT / "tests" / "scripts"
CASES = [
    ("fidelity/last_batch.py", False),
    ("fidelity/policy_lists.py", False),
    ("fidelity/model_optimizer.py", False),
    ("fidelity/lazy_env.py", False),
    ("fidelity/dqn_steps.py", False),
    ("fidelity/word_lm.py", False),
    ("nanogpt_annotated.py", True),
    ("end_binds_loss.py", True),
    ("end_binds_loss_fn.py", True),
]


def run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str, int]:
    """Wall seconds, stdout, and backward passes of ``python ARGS`` (and its children)."""
    folder = Path(tempfile.mkdtemp(dir=cwd))
    env = {**env, "COUNT_BACKWARDS_DIR": str(folder), "PYTHONPATH": str(ROOT / "tests/counting")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{args} failed:\n{proc.stderr[-2000:]}")
    return elapsed, proc.stdout, sum(int(p.read_text()) for p in folder.glob("*.count"))


def case(name: str, hand: bool, epsilon: str, work: Path, records: int = 1) -> str:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("FLOR_") and k not in AS_USERS_RUN
    }
    env.update(FLOR_HOME=str(work / "home"), FLOR_EPSILON=epsilon, OMP_NUM_THREADS="1")
    env.update(PYTHONHASHSEED="0")
    source = (SCRIPTS / name).read_text()
    script = work / Path(name).name
    script.write_text(hindsight(source, "none"))
    record = [str(script), "--flor", "x"] if hand else ["-m", "flor.cli", "run", "--name", "x"]
    for _ in range(records):
        run(record + ([] if hand else [script.name]), env, work)
    script.write_text(hindsight(source, "outside"))
    plain_s, truth, full = run([str(script)], env, work)
    replay = [str(script), "--flor", "x", "--replay_flor"] if hand else []
    replay = replay or ["-m", "flor.cli", "replay", "--name", "x"]
    replay_s, out, executed = run(replay, env, work)
    # The record's own coverage: a replay restores a block only where that beats running it
    # (a block of a millisecond runs); restoring wherever a checkpoint is counts what the
    # checkpoints spare.
    _, covered_out, uncovered = run(replay, {**env, "FLOR_RESTORE": "always"}, work)
    same = out == truth and covered_out == truth
    return (
        f"| {name} | {'same' if same else 'DIFFERENT'} | {_share(executed, full)} | "
        f"{_share(uncovered, full)} | {plain_s:.2f} s | {replay_s:.2f} s |"
    )


def _share(executed: int, full: int) -> str:
    return f"{executed}/{full} ({executed / full if full else 0.0:.0%})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epsilon", default=str(1 / 15))
    parser.add_argument("--records", type=int, default=1, help="record each script N times")
    args = parser.parse_args()
    print(f"epsilon {float(args.epsilon):.4f}, OMP_NUM_THREADS=1, {args.records} record(s)")
    print(
        "| script | replay vs full run | backward passes replayed | with --restore always "
        "| full run | replay |"
    )
    print("|---|---|---|---|---|---|")
    for name, hand in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            print(case(name, hand, args.epsilon, Path(tmp), args.records), flush=True)


if __name__ == "__main__":
    main()
