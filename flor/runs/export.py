"""``flor export``: logged values, recorded and hindsight, for the viewers people already use.

TensorBoard gets one run directory per run (``RUN_ID``), the recorded values under their
own names and each run's newest replay's values under ``hindsight/NAME``, so a hindsight
curve shows beside the recorded ones; the tensorboard package is an optional extra. CSV
gets every row of ``dataframe.logged_rows``.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Iterable
from typing import Any

from flor.errors import FlorError
from flor.runs.dataframe import COLUMNS, newest_replays, numeric

HINDSIGHT = "hindsight/"  # the tag prefix of values a replay logged


def to_csv(rows: list[dict[str, Any]], path: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def to_tensorboard(rows: list[dict[str, Any]], folder: str) -> list[str]:
    """Event files under ``folder``/RUN_ID for each run with numeric values; their folders."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        raise FlorError(
            "no-tensorboard",
            "--format tensorboard needs tensorboard: pip install 'flor[tensorboard]'",
        ) from None
    written = []
    for run_id, points in sorted(_scalars(rows).items()):
        logdir = os.path.join(folder, run_id)
        writer = EventFileWriter(logdir)
        for tag, step, value in points:
            summary = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
            )
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        writer.close()
        written.append(logdir)
    return written


def _scalars(rows: Iterable[dict[str, Any]]) -> dict[str, list[tuple[str, int, float]]]:
    """Run id -> (tag, step, value): recorded values, and those of each run's newest replay."""
    rows = numeric(list(rows))
    newest = newest_replays(rows)
    found: dict[str, list[tuple[str, int, float]]] = {}
    for r in rows:
        if r["source"] == "replay" and r["replay_id"] != newest[r["run_id"]]:
            continue
        tag = HINDSIGHT + r["name"] if r["source"] == "replay" else r["name"]
        step = r["step"] if r["step"] is not None else r["iteration"]
        found.setdefault(r["run_id"], []).append((tag, int(step), float(r["value"])))
    return found
