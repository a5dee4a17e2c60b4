"""Run identity and the layout of a run in the store.

    NAME/RUN_ID/run.json                 metadata (rewritten at the end of the run)
    NAME/RUN_ID/source.py                the exact script that was recorded
    NAME/RUN_ID/ckpt/ITER.BLOCK.OCC.pt   checkpoint data (written first)
    NAME/RUN_ID/journal/ITER.json        commit of iteration ITER's checkpoints (written last)
    NAME/RUN_ID/journal/loop-N.json      end of the N-th flor.it loop
    NAME/RUN_ID/logs/SEQ.jsonl           flor.log values while recording
    NAME/RUN_ID/replays/REPLAY_ID/...    what replays produced; never touches the above
    .blobs/AB/ABCDEF...                  tensor bytes under their SHA-256, shared by all runs

A checkpoint exists for replay only once its journal entry does (semantic 8).
Run ids sort by creation time, so the latest run is the largest id.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from flor.errors import FlorError
from flor.store import Store


def new_id() -> str:
    """A unique, time-sortable id: ``20261130-053300-1a2b3c``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def run_prefix(name: str, run_id: str) -> str:
    return f"{name}/{run_id}"


def ckpt_key(prefix: str, iteration: int, block: str, occurrence: int) -> str:
    return f"{prefix}/ckpt/{iteration:08d}.{block}.{occurrence}.pt"


def blob_key(sha256: str) -> str:
    return f".blobs/{sha256[:2]}/{sha256}"


def commit_key(prefix: str, iteration: int) -> str:
    return f"{prefix}/journal/{iteration:08d}.json"


def loop_end_key(prefix: str, loop: int) -> str:
    return f"{prefix}/journal/loop-{loop:03d}.json"


def put_json(store: Store, key: str, value: Any) -> None:
    store.put(key, json.dumps(value, indent=1, sort_keys=True).encode())


def get_json(store: Store, key: str) -> Any:
    return json.loads(store.get(key))


def list_runs(store: Store, name: str) -> list[str]:
    """Run ids of experiment ``name``, oldest first."""
    return [r for r in store.children(name) if store.exists(f"{name}/{r}/run.json")]


def list_experiments(store: Store) -> list[str]:
    return [n for n in store.children("") if not n.startswith(".") and list_runs(store, n)]


@dataclass
class RecordedRun:
    """Everything replay needs to know about one recorded run, read from the store."""

    name: str
    run_id: str
    meta: dict[str, Any]
    source: str
    commits: dict[int, dict[str, Any]] = field(default_factory=dict)  # iteration -> entry
    loops: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[int, float] = field(default_factory=dict)  # iteration -> seconds
    block_timings: dict[int, float] = field(default_factory=dict)  # iteration -> block seconds

    @property
    def prefix(self) -> str:
        return run_prefix(self.name, self.run_id)

    @property
    def iterations(self) -> int:
        """How many main-loop iterations the record covers."""
        ends = [lp["first"] + lp["count"] for lp in self.loops]
        return max(
            [*ends, *(k + 1 for k in self.commits), *(k + 1 for k in self.timings)], default=0
        )

    @property
    def complete(self) -> bool:
        """Whether the last loop ended normally (not killed while training)."""
        return bool(self.loops) and (
            self.loops[-1]["first"] + self.loops[-1]["count"] == self.iterations
        )


def replay_results(store: Store, run_prefix: str, replay_id: str) -> list[dict[str, Any]]:
    """What each segment of replay ``replay_id`` printed and logged (one dict per segment)."""
    folder = f"{run_prefix}/replays/{replay_id}"
    return [get_json(store, k) for k in store.keys(folder) if k.endswith(".json")]


def checkpoints(run: RecordedRun) -> list[dict[str, Any]]:
    """The journal's entry of every committed checkpoint of ``run``."""
    return [block for entry in run.commits.values() for block in entry["blocks"].values()]


def referenced_blobs(run: RecordedRun) -> dict[str, int]:
    """The tensor blobs (sha256 -> bytes) the run's checkpoints point at."""
    return {sha: n for ckpt in checkpoints(run) for sha, n in ckpt.get("blobs", {}).items()}


def recorded_original(store: Store, run: RecordedRun) -> str:
    """The user's script as recorded: before ``flor run`` rewrote it, if it did."""
    if run.meta.get("instrumented"):
        return store.get(f"{run.prefix}/original.py").decode()
    return run.source


def load_run(store: Store, name: str, run_id: str | None = None) -> RecordedRun:
    """Read run ``run_id`` of ``name`` (default: the latest); one-line errors if missing."""
    runs = list_runs(store, name)
    if not runs:
        raise FlorError("no-run", f"no recorded run named {name!r} in {store.url}")
    if run_id is None:
        run_id = runs[-1]
    elif run_id not in runs:
        raise FlorError("no-run", f"run {name}/{run_id} not found (runs: {', '.join(runs)})")
    prefix = run_prefix(name, run_id)
    try:
        meta = get_json(store, f"{prefix}/run.json")
        source = store.get(f"{prefix}/source.py").decode()
    except (KeyError, ValueError) as e:
        raise FlorError("bad-run", f"run {name}/{run_id} is damaged: {e}") from None
    run = RecordedRun(name, run_id, meta, source)
    for key in store.keys(f"{prefix}/journal"):
        try:
            entry = get_json(store, key)
        except ValueError:
            continue  # only possible for a foreign file: our puts are atomic
        run.timings.update({int(k): v for k, v in entry.get("timings", {}).items()})
        run.block_timings.update({int(k): v for k, v in entry.get("block_timings", {}).items()})
        if os.path.basename(key).startswith("loop-"):
            run.loops.append(entry)
        elif entry.get("blocks"):  # `flor gc --checkpoints-only` leaves entries without data
            run.commits[entry["iteration"]] = entry
    run.loops.sort(key=lambda lp: lp["loop"])
    return run
