"""`make demo`: record examples/linear.py, add a hindsight print, replay it.

Uses the default store (~/.flor, or FLOR_HOME). The edit goes into a copy of
the script in a temporary folder; examples/linear.py is left as it is.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "linear.py"
ANCHOR = '    print(f"epoch {epoch}: train loss'
HINDSIGHT = '    print(f"    hindsight: weight norm {model.weight.norm():.4f}, grad norm {model.weight.grad.norm():.4f}")'


def run(title: str, *args: str) -> float:
    print(f"\n$ python {' '.join(args)}    # {title}", flush=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True)
    return time.perf_counter() - start


def main() -> None:
    recorded = run("record", str(SCRIPT), "--flor", "linear-demo")
    with tempfile.TemporaryDirectory() as tmp:
        edited = Path(tmp) / "linear.py"
        lines = SCRIPT.read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith(ANCHOR))
        edited.write_text("\n".join([*lines[: at + 1], HINDSIGHT, *lines[at + 1 :]]) + "\n")
        print(f"\nAdded after line {at + 1}, outside the training block:\n+{HINDSIGHT}")
        replayed = run(
            "replay: checkpoints restored, training skipped",
            str(edited),
            "--flor",
            "linear-demo",
            "--replay_flor",
        )
        run(
            "replay only segment 2 of 2",
            str(edited),
            "--flor",
            "linear-demo",
            "--replay_flor",
            "2/2",
        )
    print(
        f"\nrecord took {recorded:.1f}s, replay {replayed:.1f}s (both include starting python and torch)"
    )
    subprocess.run([sys.executable, "-m", "flor.cli", "show", "linear-demo"], check=True)


if __name__ == "__main__":
    main()
