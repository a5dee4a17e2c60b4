"""The run catalogue, below the runtime: how runs are laid out in a store, and reading them.

``layout`` spells every key; ``records`` types what its files hold (``series``: the
journal's per-iteration series, compactly); ``catalogue`` lists and loads runs; ``query``,
``showing``, ``dataframe`` and ``plot`` are read-only views; ``retention`` (``flor gc``)
and ``transfer`` (``flor push``/``pull``) act on whole runs.

Imports: flor.errors, flor.inputs, flor.sources, flor.store.
"""

from flor.runs.catalogue import (
    RecordedRun,
    as_rank,
    checkpoints,
    finished_replay,
    list_experiments,
    list_runs,
    load_head,
    load_run,
    recorded_original,
    recording,
    referenced_blobs,
    replay_results,
)
from flor.runs.layout import blob_key, get_json, new_id, open_store, put_json, run_prefix

__all__ = [
    "RecordedRun",
    "as_rank",
    "blob_key",
    "checkpoints",
    "finished_replay",
    "get_json",
    "list_experiments",
    "list_runs",
    "load_head",
    "load_run",
    "new_id",
    "open_store",
    "put_json",
    "recorded_original",
    "recording",
    "referenced_blobs",
    "replay_results",
    "run_prefix",
]
