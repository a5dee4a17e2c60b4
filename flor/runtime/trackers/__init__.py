"""The trackers a script logs to (MLflow, TensorBoard, W&B), under flor: a recording notes where
it sent what, a replay adds only its hindsight values to the recorded runs (``ledger``).
Patched as the script imports them (``imports``); ``import flor`` never imports them.

Imports: nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from flor.runtime.trackers.imports import after_import
from flor.runtime.trackers.ledger import Ledger

__all__ = ["Ledger", "install"]


def install(current: Callable[[], Ledger | None]) -> None:
    """Patch each tracker once it is imported (now, where it already is; once a process);
    ``current``: the session's ledger, asked at every call (None: flor is off)."""
    from flor.runtime.trackers import mlflow_runs, tensorboard_writers, wandb_runs

    after_import("mlflow", functools.partial(mlflow_runs.patch, current=current))
    after_import(
        "torch.utils.tensorboard.writer",
        functools.partial(tensorboard_writers.patch, current=current),
    )
    after_import("wandb", functools.partial(wandb_runs.patch, current=current))
