"""A frozen 100 MB backbone under a trained head, checkpointed every step: stored once?

``flor run`` records the script with a checkpoint at every one of its 50 steps
(``FLOR_EPSILON=1e9``); the store's size is compared with the backbone's, and a replay of a
print after the loop (one restore of the last checkpoint) with the script's zero-step run.

    python benchmarks/bench_backbone.py [--steps 50] [--mb 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import sys
import torch
steps, width = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
backbone = torch.nn.Linear(width, width, bias=False).requires_grad_(False)  # frozen
head = torch.nn.Linear(width, 1)
optimizer = torch.optim.SGD(head.parameters(), lr=1e-3)
x = torch.randn(2, width)
loss = torch.zeros(())
for step in range(steps):
    loss = head(torch.tanh(backbone(x))).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("done", f"{loss.item():.6f}")
"""


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return time.perf_counter() - start


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    width = int((args.mb * 1e6 / 4) ** 0.5)
    with tempfile.TemporaryDirectory() as tmp:
        work, home = Path(tmp), Path(tmp) / "home"
        (work / "train.py").write_text(SCRIPT)
        env = {**os.environ, "FLOR_HOME": str(home), "OMP_NUM_THREADS": "1"}
        flor = [sys.executable, "-m", "flor.cli"]
        py = [sys.executable, "train.py"]
        floor = timed([*py, "0", str(width)], env, work)
        plain = timed([*py, str(args.steps), str(width)], env, work)
        record = timed(
            [*flor, "run", "--name", "bb", "train.py", str(args.steps), str(width)],
            {**env, "FLOR_EPSILON": "1e9"},
            work,
        )
        stored = folder_bytes(home)
        source = (work / "train.py").read_text()
        (work / "train.py").write_text(source + 'print("head", head.weight.norm().item())\n')
        replay = timed([*flor, "replay", "--name", "bb"], env, work)
        show = subprocess.run(
            [*flor, "show", "bb"], env=env, cwd=work, capture_output=True, text=True
        )
        kept = next((ln for ln in show.stdout.splitlines() if ln.startswith("checkpoints")), "")
    backbone = width * width * 4
    print(
        json.dumps(
            {
                "backbone MB": round(backbone / 1e6, 1),
                "steps": args.steps,
                "checkpoints": kept.split(None, 2)[1] if kept else "?",
                "store MB": round(stored / 1e6, 1),
                "store / backbone": round(stored / backbone, 2),
                "seconds": {
                    "floor": round(floor, 2),
                    "plain": round(plain, 2),
                    "record": round(record, 2),
                    "replay (print after the loop)": round(replay, 2),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
