"""`flor gc`: which runs (or checkpoints) a retention rule deletes, and deleting them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from flor.runtime import runs
from flor.store import Store


@dataclass
class Collection:
    """What a rule selected: keys per run prefix, and their bytes."""

    keys: dict[str, list[str]] = field(default_factory=dict)
    nbytes: int = 0


def select(
    store: Store,
    keep: int | None,
    older_than_days: float | None,
    checkpoints_only: bool,
    name: str | None = None,
) -> Collection:
    """Runs beyond the newest ``keep`` of each experiment and/or older than the age given."""
    found = Collection()
    for experiment in [name] if name else runs.list_experiments(store):
        ids = runs.list_runs(store, experiment)
        for run_id in ids[: len(ids) - keep] if keep is not None else ids:
            prefix = runs.run_prefix(experiment, run_id)
            started = runs.get_json(store, f"{prefix}/run.json").get("started", 0)
            if older_than_days is not None and started > time.time() - older_than_days * 86400:
                continue
            keys = list(store.keys(f"{prefix}/ckpt" if checkpoints_only else prefix))
            if keys:
                found.keys[prefix] = keys
                found.nbytes += sum(store.size(k) for k in keys)
    return found


def delete(store: Store, found: Collection, checkpoints_only: bool) -> None:
    for prefix, keys in found.keys.items():
        for key in keys:
            store.delete(key)
        if checkpoints_only:  # journal entries keep timings and output, but point at no data
            for key in store.keys(f"{prefix}/journal"):
                if not key.rsplit("/", 1)[-1].startswith("loop-"):
                    entry = runs.get_json(store, key)
                    entry["blocks"] = {}  # replay re-executes these iterations
                    runs.put_json(store, key, entry)
