"""flor: hindsight logging for PyTorch training.

Record a run with cheap adaptive checkpoints; later add prints or ``flor.log``
calls and replay, restoring checkpoints instead of re-training.
"""

from __future__ import annotations

from flor.launch.start import activate_from_process as _activate
from flor.runtime.loop.api import SkipBlock, callback, globals_of, it, log
from flor.runtime.state.unbound import UNBOUND

__all__ = [
    "UNBOUND",
    "SkipBlock",
    "__version__",
    "callback",
    "dataframe",
    "globals_of",
    "it",
    "log",
    "plot",
]
__version__ = "0.1.0"


def dataframe(*names: str, home: str | None = None):  # type: ignore[no-untyped-def]
    """Logged values of the experiments ``names`` (all, if none) as a pandas DataFrame.

    ``home`` is a store's folder or URL (default: ``FLOR_STORE``, ``FLOR_HOME``, ``~/.flor``).
    """
    import os

    from flor.runs.dataframe import dataframe as frame
    from flor.store import StoreSettings

    return frame(*names, url=home, settings=StoreSettings.from_env(os.environ))


def plot(name: str, value: str, path: str | None = None, home: str | None = None) -> str:
    """A PNG of the logged ``value`` per iteration in every run of experiment ``name``, one
    line per run: the values its newest replay logged (a hindsight edit carried to it by
    ``flor replay --runs``), else those it recorded. Returns the file's path."""
    import os

    from flor.runs import layout
    from flor.runs.dataframe import logged_rows
    from flor.runs.plot import plot_across
    from flor.store import StoreSettings

    store = layout.open_store(home, StoreSettings.from_env(os.environ))
    path = path or f"{name}-{value}.png"
    plot_across(logged_rows(store, (name,)), value, name, path)
    return path


_activate()
