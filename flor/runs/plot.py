"""PNG line plots of one logged value per iteration (matplotlib optional): one line per
source of one run (`flor logs --plot`), or one line per run (`flor.plot`)."""

from __future__ import annotations

from typing import Any

from flor.errors import FlorError
from flor.runs.dataframe import newest_replays, numeric


def plot_values(rows: list[dict[str, Any]], value: str, title: str, path: str) -> None:
    """One line per source (the record, each replay) of the numeric values named ``value``."""
    series: dict[str, list[tuple[int, float]]] = {}
    for r in numeric(rows, value):
        series.setdefault(r["source"], []).append((r["iteration"], float(r["value"])))
    _plot(series, value, title, path)


def plot_across(rows: list[dict[str, Any]], value: str, title: str, path: str) -> None:
    """One line per run (``dataframe.logged_rows``), as ``series_across`` draws them."""
    _plot(series_across(rows, value), value, title, path)


def series_across(rows: list[dict[str, Any]], value: str) -> dict[str, list[tuple[int, float]]]:
    """One line per run: its newest replay's values named ``value`` where a replay logged
    it (a hindsight edit), else its recorded ones. A fork's line continues its parent's:
    the parent's points up to the fork point come first."""
    rows = numeric(rows, value)
    newest = newest_replays(rows)  # runs with none plot their recorded values
    points: dict[str, list[tuple[int, float]]] = {}
    labels: dict[str, str] = {}
    forks: dict[str, tuple[str, int]] = {}
    for r in rows:
        if r["replay_id"] == newest.get(r["run_id"]):  # a record row's is None
            labels[r["run_id"]] = f"{r['run_id']} (version {r['version']}, {r['source']})"
            points.setdefault(r["run_id"], []).append((r["iteration"], float(r["value"])))
            if r["parent"] is not None:
                forks[r["run_id"]] = (r["parent"], r["forked_at"])
    for run_id in sorted(forks):  # ids sort by time: a parent's line is whole before its fork's
        parent, at = forks[run_id]
        before = [p for p in points.get(parent, []) if p[0] <= at]
        points[run_id] = before + points[run_id]
    return {labels[r]: sorted(p) for r, p in points.items()}


def _plot(series: dict[str, list[tuple[int, float]]], value: str, title: str, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FlorError(
            "no-matplotlib", "plotting needs matplotlib: pip install matplotlib"
        ) from None
    if not series:
        raise FlorError("no-values", f"no numeric values named {value!r} were logged in {title}")
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations
    for source, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=source)
    ax.set(xlabel="iteration", ylabel=value, title=f"{value} in {title}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
