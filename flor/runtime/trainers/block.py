"""The block a library trainer's adapter opens each iteration: its training, or its checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flor.runtime.loop.api import SkipBlock


def run_block(
    name: str,
    train: Callable[[], Any],
    state: Callable[[], dict[str, Any]],
    settle: Callable[[dict[str, Any]], None],
) -> Any:
    """``train()`` inside block ``name``, or, where replay skips it, its checkpoint restored:
    ``state()``'s parts in place where they can be, then ``settle`` puts back the rest
    (ints, flags, a tensor the trainer rebinds), given the parts as restored.
    What ``train`` returns must be a cheap value (a flag, a number): it is checkpointed as
    a local of this frame and rebound on restore. Few names here, and none that holds
    state: the scope of ``SkipBlock.end`` is checkpointed too."""
    result = None
    _flor_trained = False  # not checkpointed (``_flor``): whether this process trained
    if SkipBlock.step_into(name):
        _flor_trained = True
        result = train()
    parts = state()
    restored = SkipBlock.end(**parts)  # each part in place where it can; a tensor rebound
    if not _flor_trained:
        settle(dict(zip(parts, restored if len(parts) > 1 else (restored,))))
    return result
