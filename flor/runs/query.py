"""Read-only views of recorded runs for ``flor ls/show/logs``."""

from __future__ import annotations

import json
from typing import Any

from flor import runs
from flor.runs import layout
from flor.store import Store


def run_size(store: Store, prefix: str) -> int:
    return sum(store.sizes(prefix).values())


def summary(store: Store, run: runs.RecordedRun) -> dict[str, Any]:
    """One run: its metadata plus what its journal says."""
    replays = store.children(layout.replays_folder(run.prefix))
    ckpts = runs.checkpoints(run)
    new_blobs = sum(c.new_blob_bytes for c in ckpts)
    logical = sum(c.logical for c in ckpts)
    stored = sum(c.bytes for c in ckpts) + new_blobs
    return {
        **run.meta.to_json(),
        "iterations": run.iterations,
        "complete": run.complete,
        "committed": sorted(g for g, c in run.commits.items() if c.blocks),  # not thinned
        "bytes": run_size(store, run.prefix) + new_blobs,  # its files, and the blobs it added
        "checkpoint_bytes": logical,  # what its checkpoints hold
        "saved_bytes": logical - stored,  # what deduplication did not store again
        "replays": replays,
    }


def logged_values(store: Store, name: str, run_id: str) -> list[dict[str, Any]]:
    """Every ``flor.log`` value of a run and its replays, in iteration order."""
    prefix = layout.run_prefix(name, run_id)
    rows: list[dict[str, Any]] = []
    for key in store.keys(layout.logs_folder(prefix)):
        for line in store.get(key).decode().splitlines():
            rows.append({"source": "record", **json.loads(line)})
    for replay_id in store.children(layout.replays_folder(prefix)):
        for segment in runs.replay_results(store, prefix, replay_id):
            for entry in segment.logs:
                rows.append({"source": f"replay {replay_id}", **entry})
    rows.sort(key=lambda r: (r["iteration"] if r["iteration"] is not None else -1, r["source"]))
    return rows


def ranges(values: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out: list[str] = []
    for v in values:
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = out[-1].split("-")[0] + f"-{v}"
        else:
            out.append(str(v))
    return ",".join(out) or "none"
