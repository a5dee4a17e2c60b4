"""Hindsight across versions: one edit replayed in every past run (``flor replay --runs``),
with 1 and 2 workers, against re-running every version.

Three versions of the epoch shape (``shapes/epoch_loop.py``: as is, a lower learning rate,
a narrower hidden layer) are recorded, the newest twice: four runs. Then one hindsight
print is added to the newest version, and, interleaved, at 1 torch thread, whole
processes:

- ``floor``: every version's script with zero epochs, one after another: what no replay
  of the four runs can beat (python and torch start-up, data, model, once per run);
- ``rerun``: every version with the print inserted by hand, run in full: what the replay
  saves the user from (and its ground truth: each run's replayed output must equal it);
- ``replay x1`` / ``replay x2``: ``flor replay --runs all --workers 1`` and ``2``.

    python benchmarks/bench_across.py [--epochs N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

from bench_sparse import AS_USERS_RUN, timed  # timed: a whole process's wall seconds and stdout

HERE = Path(__file__).resolve().parent
SOURCE = (HERE / "shapes" / "epoch_loop.py").read_text()
VERSIONS = {
    "v1": SOURCE,
    "v2": SOURCE.replace("lr=1e-3", "lr=5e-4"),
    "v3": SOURCE.replace("lr=1e-3", "lr=5e-4").replace("256", "128"),
}
RUNS = ["v1", "v2", "v3", "v3"]  # the versions recorded, in order
ANCHOR = '    print(f"epoch {epoch} loss {loss.item():.4f} acc {acc:.4f}")\n'
EDIT = '    print(f"  hindsight weight norm {model[0].weight.norm():.4f}")\n'


def sections(stdout: str) -> list[str]:
    return re.split(r"^==> \S+ \(version \w+\) <==\n", stdout, flags=re.M)[1:]


def bench(epochs: int, repeats: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="bench-across-"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    for unset in ("FLOR_STORE", "FLOR_RESTORE", *AS_USERS_RUN):
        env.pop(unset, None)
    py, flor = sys.executable, [sys.executable, "-m", "flor.cli"]
    for version, source in VERSIONS.items():
        (work / f"{version}_edited.py").write_text(source.replace(ANCHOR, ANCHOR + EDIT))
    for version in RUNS:
        (work / "train.py").write_text(VERSIONS[version])
        timed([*flor, "run", "--name", "across", "train.py", str(epochs)], env, work)
    (work / "train.py").write_text(VERSIONS["v3"].replace(ANCHOR, ANCHOR + EDIT))
    n = str(epochs)
    runs: dict[str, list[float]] = {}
    truth: list[str] = []
    for _ in range(repeats):
        floor = sum(timed([py, f"{v}_edited.py", "0"], env, work)[0] for v in RUNS)
        rerun, outputs = 0.0, []
        for v in RUNS:
            seconds, out = timed([py, f"{v}_edited.py", n], env, work)
            rerun, outputs = rerun + seconds, [*outputs, out]
        truth = outputs
        runs.setdefault("floor", []).append(floor)
        runs.setdefault("rerun", []).append(rerun)
        for workers in ("1", "2"):
            replay = [*flor, "replay", "--name", "across", "--runs", "all", "--workers", workers]
            seconds, out = timed(replay, env, work)
            if sections(out) != truth:
                sys.exit(f"replay x{workers} printed other output than re-running each version")
            runs.setdefault(f"replay x{workers}", []).append(seconds)
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {
        "epochs": epochs,
        "runs": len(RUNS),
        "seconds": {k: round(v, 2) for k, v in med.items()},
        "x2 over x1": round(med["replay x1"] / med["replay x2"], 2),
        "x1 speedup over rerun": round(med["rerun"] / med["replay x1"], 2),
        "x2 speedup over rerun": round(med["rerun"] / med["replay x2"], 2),
        "x1 bound (rerun / floor)": round(med["rerun"] / med["floor"], 2),
        "x1 share of its bound": round(med["floor"] / med["replay x1"], 2),
        "all": {k: [round(x, 2) for x in v] for k, v in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(bench(args.epochs, args.repeats), indent=1))


if __name__ == "__main__":
    main()
