"""Bytes a checkpoint writes against the bytes that changed since the one before, DQN shape.

``flor run`` records ``benchmarks/shapes/dqn_loop.py`` (at the default budget, or with
``--epsilon``). Then each checkpoint is read back: what it wrote (its manifest and the chunks
the store did not hold yet, from its journal entry) beside what changed since the previous
checkpoint of the run, counted value by value (every tensor, array and pickled value of the
two restored trees: the elements that differ, times their size; a value that is new, resized
or retyped counts whole). The manifest (the tree of small values, inline) is the fixed part.

    python benchmarks/bench_bytes.py [--steps 10000] [--epsilon 0.0667]
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
from typing import Any

import numpy as np
import torch
from bench_sparse import AS_USERS_RUN

from flor.runs.catalogue import checkpoints, load_run
from flor.runs.layout import KINDS
from flor.runtime.state.codec import decode
from flor.store.local import LocalStore

HERE = Path(__file__).resolve().parent


def leaves(tree: Any, path: str = "") -> dict[str, Any]:
    """The tree's tensors, arrays and byte strings by their path in it."""
    if isinstance(tree, dict) and tree.get("k") == "ndarray":  # its bytes, as its elements
        return {path: tree["v"].numpy().view(np.dtype(tree["dtype"]))}
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in leaves(sub, f"{path}/{key}").items()}
    if isinstance(tree, (list, tuple)):
        return {k: v for i, sub in enumerate(tree) for k, v in leaves(sub, f"{path}/{i}").items()}
    if isinstance(tree, (torch.Tensor, np.ndarray, bytes)):
        return {path: tree}
    return {}


def as_elements(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().contiguous().numpy()
    if isinstance(value, bytes):
        return np.frombuffer(value, dtype=np.uint8)
    return np.ascontiguousarray(value)


def changed_bytes(before: dict[str, Any], after: dict[str, Any]) -> int:
    total = 0
    for path, value in after.items():
        new = as_elements(value)
        old = as_elements(before[path]) if path in before else None
        if old is None or old.shape != new.shape or old.dtype != new.dtype:
            total += new.nbytes
        elif new.size:  # elements whose bytes differ
            before_bytes = old.reshape(-1).view(np.uint8).reshape(old.size, -1)
            differ = before_bytes != new.reshape(-1).view(np.uint8).reshape(new.size, -1)
            total += int(differ.any(axis=1).sum()) * new.itemsize
    return total


def record(work: Path, steps: int, epsilon: float | None) -> LocalStore:
    (work / "train.py").write_text((HERE / "shapes" / "dqn_loop.py").read_text())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FLOR_HOME": str(work / "home")}
    for unset in ("FLOR_STORE", *AS_USERS_RUN):
        env.pop(unset, None)
    cmd = [sys.executable, "-m", "flor.cli", "run", "--name", "dqn"]
    cmd += ["--epsilon", str(epsilon)] if epsilon else []
    proc = subprocess.run([*cmd, "train.py", str(steps)], env=env, cwd=work, capture_output=True)
    if proc.returncode != 0:
        sys.exit(proc.stderr.decode())
    return LocalStore(work / "home", KINDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--epsilon", type=float)
    args = parser.parse_args()
    store = record(Path(tempfile.mkdtemp(prefix="bench-bytes-")), args.steps, args.epsilon)
    run = load_run(store, "dqn")
    rows, before = [], None
    for entry in checkpoints(run):
        tree = leaves(decode(store.get(entry.key), entry.sha256, entry.key, store))
        if before is not None:
            rows.append((entry.bytes + entry.new_blob_bytes, changed_bytes(before, tree), entry))
        before = tree
    ratios = [(written - e.bytes) / changed for written, changed, e in rows if changed]
    print(
        json.dumps(
            {
                "checkpoints": len(rows) + 1,
                "written per checkpoint (median, bytes)": statistics.median(r[0] for r in rows),
                "changed per checkpoint (median, bytes)": statistics.median(r[1] for r in rows),
                "manifest per checkpoint (median, bytes)": statistics.median(
                    r[2].bytes for r in rows
                ),
                "chunks written / changed (median)": round(statistics.median(ratios), 2),
                "chunks written / changed (worst)": round(max(ratios), 2),
                "within 2x changed + manifest": all(w <= 2 * c + e.bytes for w, c, e in rows),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
