"""`flor logs --plot`: a PNG line plot of one logged value per iteration (matplotlib optional)."""

from __future__ import annotations

from typing import Any

from flor.errors import FlorError


def plot_values(rows: list[dict[str, Any]], value: str, title: str, path: str) -> None:
    """One line per source (the record, each replay) of the numeric values named ``value``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FlorError(
            "no-matplotlib", "--plot needs matplotlib: pip install matplotlib"
        ) from None
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if (
            r["name"] == value
            and isinstance(r["value"], (int, float))
            and r["iteration"] is not None
        ):
            series.setdefault(r["source"], []).append((r["iteration"], float(r["value"])))
    if not series:
        raise FlorError("no-values", f"no numeric values named {value!r} were logged in {title}")
    fig, ax = plt.subplots(figsize=(7, 4))
    for source, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=source)
    ax.set(xlabel="iteration", ylabel=value, title=f"{value} in {title}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
