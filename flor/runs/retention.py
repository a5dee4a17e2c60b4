"""Deleting recorded data: `flor gc`'s retention rules, and a recording's thinning.

Tensor blobs are shared between checkpoints and runs, so a blob goes only
when no run that stays still points at it, and none while a run records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from flor import runs
from flor.runs import layout
from flor.runs.records import Commit
from flor.store import Store


@dataclass
class Collection:
    """What a rule selected: keys per run prefix, blobs nobody else uses, and their bytes."""

    keys: dict[str, list[str]] = field(default_factory=dict)
    blobs: list[str] = field(default_factory=list)
    nbytes: int = 0
    recording: list[str] = field(default_factory=list)  # runs left alone: still recording


def select(
    store: Store,
    keep: int | None,
    older_than_days: float | None,
    checkpoints_only: bool,
    name: str | None = None,
) -> Collection:
    """Runs beyond the newest ``keep`` of each experiment and/or older than the age given."""
    newest: dict[str, set[str]] = {}
    for experiment in runs.list_experiments(store):
        ids = runs.list_runs(store, experiment)
        newest[experiment] = set(ids[len(ids) - keep :]) if keep else set()

    def chosen(run: runs.RecordedRun) -> bool:
        started = run.meta.started
        if older_than_days is not None and started > time.time() - older_than_days * 86400:
            return False
        return (not name or run.name == name) and (
            keep is None or run.run_id not in newest[run.name]
        )

    return collect(store, chosen, checkpoints_only)


def collect(
    store: Store, chosen: Callable[[runs.RecordedRun], bool], checkpoints_only: bool
) -> Collection:
    """The keys of the ``chosen`` runs (or of their checkpoints), and the blobs only they use."""
    found = Collection()
    dropped: dict[str, int] = {}  # blobs of the chosen runs
    kept: set[str] = set()  # blobs of every run that stays
    for experiment in runs.list_experiments(store):
        for run_id in runs.list_runs(store, experiment):
            run = runs.load_run(store, experiment, run_id)
            blobs = runs.referenced_blobs(run)
            live = runs.recording(store, run)
            if live:
                found.recording.append(run.prefix)
            if live or not chosen(run):
                kept.update(blobs)
                continue
            if checkpoints_only:  # every rank's journal keeps its own checkpoints
                folders = {j.prefix: layout.ckpt_folder(j.prefix) for j in (run, *run.others)}
            else:  # the run's prefix holds its other ranks' journals
                folders = {run.prefix: run.prefix}
            for prefix, folder in folders.items():
                sizes = store.sizes(folder)
                if sizes:
                    found.keys[prefix] = sorted(sizes)
                    found.nbytes += sum(sizes.values())
            dropped.update(blobs)
    # A recording's next checkpoint may point at any blob the store holds (it does not
    # write one that exists): while a run records, no blob goes.
    found.blobs = [] if found.recording else sorted(set(dropped) - kept)
    found.nbytes += sum(dropped[sha] for sha in found.blobs)
    return found


def delete(store: Store, found: Collection, checkpoints_only: bool) -> None:
    if checkpoints_only:
        for prefix in found.keys:
            for key in store.keys(layout.journal_folder(prefix)):
                if not layout.is_loop_end(key):
                    _empty_commit(store, key)
        store.flush()  # no entry may point at data once it is gone (on S3: uploaded first)
    for keys in found.keys.values():
        for key in keys:
            store.delete(key)
    for sha in found.blobs:  # last: a blob goes only once nothing points at it
        store.delete(layout.blob_key(sha))


def drop_checkpoint(
    store: Store, prefix: str, iteration: int, keys: Iterable[str], blobs: Iterable[str]
) -> None:
    """Thin one iteration's checkpoint out of a run: its commit first points at nothing,
    then its manifests ``keys`` and the tensor ``blobs`` that only it used go."""
    _empty_commit(store, layout.commit_key(prefix, iteration))
    store.flush()
    for key in keys:
        store.delete(key)
    for sha in blobs:
        store.delete(layout.blob_key(sha))


def _empty_commit(store: Store, key: str) -> None:
    """The entry keeps its iterations' timings and output but points at no data: replay
    re-executes those iterations."""
    commit = Commit.from_json(layout.get_json(store, key))
    layout.put_json(store, key, replace(commit, blocks={}).to_json(), compact=True)
