"""``flor.dataframe``: logged values across runs, recorded and replayed, as one table.

Each row is one ``flor.log`` value of a run: when it was recorded (``source`` "record") or
by a replay of it (``source`` "replay", with its ``replay_id``), beside the run's code
``version``, so that the values a hindsight edit produced in every past run (``flor replay
--runs``) sit next to what those runs logged themselves. pandas is optional.
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
)


def logged_rows(store: Store, names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every logged value of the experiments ``names`` (all, if none), one dict each."""
    rows = []
    for experiment in names or list_experiments(store):
        for run_id in list_runs(store, experiment):
            version = _version(store, experiment, run_id)
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
                    }
                )
    return [{c: r.get(c) for c in COLUMNS} for r in rows]


def _version(store: Store, experiment: str, run_id: str) -> str:
    try:
        return version_of(recorded_sources(store, load_head(store, experiment, run_id)))
    except FlorError:
        return "unknown"


def dataframe(*names: str, url: str | None, settings: StoreSettings) -> Any:
    """``logged_rows`` as a pandas DataFrame, columns ``COLUMNS``."""
    try:
        import pandas as pd
    except ImportError:
        raise FlorError("no-pandas", "flor.dataframe needs pandas: pip install pandas") from None
    store = layout.open_store(url, settings)
    return pd.DataFrame(logged_rows(store, names), columns=list(COLUMNS))
