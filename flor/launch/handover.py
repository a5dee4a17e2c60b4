"""A parallel replay's rewrite of the edited script, made once, by its parent.

Rewriting the edited script (libcst) takes about as long as importing torch. The
workers of ``flor replay --workers K`` start first, and the parent rewrites the
script while they import torch: it must, to report the edit and refuse it where it
cannot be replayed. Each worker rewriting it again would put K more rewrites on the
same cores as the K torch imports, so the parent hands its rewrite over instead: it
pickles it into a file of its own private folder, and each worker waits for that file.
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

from flor.errors import FlorError


def hand_over(path: str, rewritten: Any) -> None:
    """Write ``rewritten`` for the workers; they see the whole file or none of it."""
    with open(f"{path}.tmp", "wb") as f:
        pickle.dump(rewritten, f)
    os.replace(f"{path}.tmp", path)


def taken_over(path: str, parent: int, poll: float = 0.01) -> Any:
    """What the parent process ``parent`` handed over at ``path``, waited for; a one-line
    error if the parent ends first (it stops its workers when it refuses an edit)."""
    while not os.path.exists(path):
        try:
            os.kill(parent, 0)
        except (ProcessLookupError, PermissionError):  # gone (its pid another user's now)
            raise FlorError(
                "no-parent", "the parallel replay that started this worker has ended"
            ) from None
        time.sleep(poll)
    with open(path, "rb") as f:
        return pickle.load(f)  # the parent's own file, in a folder only this user reads
