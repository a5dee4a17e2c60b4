"""``flor.dataframe``: logged values across runs as a pandas DataFrame (pandas optional)."""

from __future__ import annotations

from typing import Any

from flor.errors import FlorError
from flor.store import StoreSettings


def dataframe(*names: str, url: str | None, settings: StoreSettings) -> Any:
    """Every ``flor.log`` value of the experiments ``names`` (all, if none), one row each.

    Columns: experiment, run_id, source ("record" or "replay ID"), iteration,
    step, name, value.
    """
    try:
        import pandas as pd
    except ImportError:
        raise FlorError("no-pandas", "flor.dataframe needs pandas: pip install pandas") from None
    from flor import runs
    from flor.runs import query

    store = runs.open_store(url, settings)
    rows = []
    for experiment in names or runs.list_experiments(store):
        for run_id in runs.list_runs(store, experiment):
            for row in query.logged_values(store, experiment, run_id):
                rows.append({"experiment": experiment, "run_id": run_id, "step": None, **row})
    columns = ["experiment", "run_id", "source", "iteration", "step", "name", "value"]
    return pd.DataFrame(rows, columns=columns)
