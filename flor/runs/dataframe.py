"""``flor.dataframe``: logged values across runs, recorded and replayed, as one table.

Each row is one ``flor.log`` value of a run: when it was recorded (``source`` "record") or
by a replay of it (``source`` "replay", with its ``replay_id``), beside the run's code
``version`` and its lineage (a fork's ``parent`` run and ``forked_at`` iteration: its own
iterations follow that one of its parent's), so that the values a hindsight edit produced
in every past run (``flor replay --runs``) sit next to what those runs logged themselves.
pandas is optional.
"""

from __future__ import annotations

from typing import Any

from flor.errors import FlorError
from flor.runs import layout, query
from flor.runs.catalogue import list_experiments, list_runs, load_head
from flor.runs.versions import recorded_sources, version_of
from flor.store import Store, StoreSettings

COLUMNS = (
    "experiment",
    "run_id",
    "version",
    "source",
    "replay_id",
    "iteration",
    "step",
    "name",
    "value",
    "parent",
    "forked_at",
)


def logged_rows(store: Store, names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every logged value of the experiments ``names`` (all, if none), one dict each."""
    rows = []
    for experiment in names or list_experiments(store):
        for run_id in list_runs(store, experiment):
            version, lineage = _version(store, experiment, run_id)
            for row in query.logged_values(store, experiment, run_id):
                source, _, replay_id = row["source"].partition(" ")
                rows.append(
                    {
                        **row,
                        "experiment": experiment,
                        "run_id": run_id,
                        "version": version,
                        "source": source,
                        "replay_id": replay_id or None,
                        "step": row.get("step"),
                        **lineage,
                    }
                )
    return [{c: r.get(c) for c in COLUMNS} for r in rows]


def numeric(rows: list[dict[str, Any]], name: str | None = None) -> list[dict[str, Any]]:
    """The rows with a number for a value, logged in an iteration (of ``name`` only, if given):
    what a plot or a TensorBoard curve can show."""
    return [
        r
        for r in rows
        if isinstance(r["value"], (int, float))
        and r["iteration"] is not None
        and (name is None or r["name"] == name)
    ]


def newest_replays(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Run id -> the newest replay among ``rows`` of that run (replay ids sort by time)."""
    newest: dict[str, str] = {}
    for r in rows:
        if r["source"] == "replay":
            newest[r["run_id"]] = max(newest.get(r["run_id"], ""), r["replay_id"] or "")
    return newest


def _version(store: Store, experiment: str, run_id: str) -> tuple[str, dict[str, Any]]:
    """The run's code version, and its parent and fork point (None: not a fork)."""
    try:
        head = load_head(store, experiment, run_id)
    except FlorError:
        return "unknown", {}
    lineage = {"parent": head.meta.parent, "forked_at": head.meta.forked_at}
    try:
        return version_of(recorded_sources(store, head)), lineage
    except FlorError:
        return "unknown", lineage


def dataframe(*names: str, url: str | None, settings: StoreSettings) -> Any:
    """``logged_rows`` as a pandas DataFrame, columns ``COLUMNS``."""
    try:
        import pandas as pd
    except ImportError:
        raise FlorError("no-pandas", "flor.dataframe needs pandas: pip install pandas") from None
    store = layout.open_store(url, settings)
    return pd.DataFrame(logged_rows(store, names), columns=list(COLUMNS))
