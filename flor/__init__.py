"""flor: hindsight logging for PyTorch training.

Record a run with cheap adaptive checkpoints; later add prints or ``flor.log``
calls and replay, restoring checkpoints instead of re-training.
"""

from __future__ import annotations

from flor.runtime.api import SkipBlock, it, log
from flor.runtime.context import activate_from_process as _activate
from flor.runtime.unbound import UNBOUND

__all__ = ["UNBOUND", "SkipBlock", "__version__", "it", "log"]
__version__ = "0.1.0"

_activate()
