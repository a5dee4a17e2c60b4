"""flor: hindsight logging for PyTorch training.

Record a run with cheap adaptive checkpoints; later add prints or ``flor.log``
calls and replay, restoring checkpoints instead of re-training.
"""

from __future__ import annotations

from flor.launch.start import activate_from_process as _activate
from flor.runtime.loop.api import SkipBlock, globals_of, it, log
from flor.runtime.state.unbound import UNBOUND

__all__ = ["UNBOUND", "SkipBlock", "__version__", "dataframe", "globals_of", "it", "log"]
__version__ = "0.1.0"


def dataframe(*names: str, home: str | None = None):  # type: ignore[no-untyped-def]
    """Logged values of the experiments ``names`` (all, if none) as a pandas DataFrame.

    ``home`` is a store's folder or URL (default: ``FLOR_STORE``, ``FLOR_HOME``, ``~/.flor``).
    """
    import os

    from flor.runs.dataframe import dataframe as frame
    from flor.store import StoreSettings

    return frame(*names, url=home, settings=StoreSettings.from_env(os.environ))


_activate()
