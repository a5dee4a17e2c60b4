"""flor: hindsight logging for PyTorch training.

Record a run with cheap adaptive checkpoints; later add prints or ``flor.log``
calls and replay, restoring checkpoints instead of re-training.
"""

from __future__ import annotations

from flor.runtime.api import SkipBlock, it, log
from flor.runtime.context import activate_from_process as _activate
from flor.runtime.unbound import UNBOUND

__all__ = ["UNBOUND", "SkipBlock", "__version__", "dataframe", "it", "log"]
__version__ = "0.1.0"


def dataframe(*names: str, home: str | None = None):  # type: ignore[no-untyped-def]
    """Logged values of the experiments ``names`` (all, if none) as a pandas DataFrame."""
    from flor.frames import dataframe as frame

    return frame(*names, home=home)


_activate()
