"""torch's ``SummaryWriter`` under a session's ``Ledger``: in a replay, the k-th writer writes
into the log directory the recording's k-th wrote to, an event file of its own (named for
the replay), so the hindsight curves appear beside the recorded ones; every ``add_*`` call
goes through ``Ledger.passes`` under its tag."""

from __future__ import annotations

import functools
import os
import tempfile
import threading
import types
from collections.abc import Callable
from typing import Any

from flor.runtime.trackers.ledger import RECORD, REPLAY, Ledger

KIND = "tensorboard"
_inside = threading.local()  # an add_* call opens writers of its own (add_hparams): not sinks


def patch(module: types.ModuleType, current: Callable[[], Ledger | None]) -> None:
    """``current``: the session's ledger."""
    cls = module.SummaryWriter
    if getattr(cls, "_flor_patched", False):
        return
    cls._flor_patched = True

    def ledger() -> Ledger | None:
        return None if getattr(_inside, "call", False) else current()

    cls.__init__ = _opening(cls.__init__, ledger)
    for name in dir(cls):
        if name.startswith("add_"):
            setattr(cls, name, _adding(getattr(cls, name), ledger))


def _opening(
    init: Callable[..., None], current: Callable[[], Ledger | None]
) -> Callable[..., None]:
    @functools.wraps(init)
    def opened(
        self: Any,
        log_dir: str | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
    ) -> None:
        ledger = current()
        if ledger is None or ledger.mode == RECORD:
            init(self, log_dir, comment, purge_step, max_queue, flush_secs, filename_suffix)
            if ledger is not None:
                self._flor_sink = ledger.opened_sink(KIND, os.path.abspath(self.log_dir))
            return
        sink = self._flor_sink = ledger.recorded_sink(KIND)
        # nothing reaches an unmapped one: out of the way of the user's directories
        log_dir = tempfile.mkdtemp(prefix="flor-unmapped-") if sink is None else sink.id
        if ledger.mode == REPLAY:  # beside the recorded events, never over them
            purge_step, filename_suffix = None, f"{filename_suffix}.flor-replay-{ledger.replay_id}"
        init(self, log_dir, comment, purge_step, max_queue, flush_secs, filename_suffix)

    return opened


def _adding(add: Callable[..., Any], current: Callable[[], Ledger | None]) -> Callable[..., Any]:
    @functools.wraps(add)
    def added(self: Any, *args: Any, **kwargs: Any) -> Any:
        ledger = current()
        if ledger is not None:
            tag = args[0] if args else kwargs.get("tag", kwargs.get("main_tag", add.__name__))
            if not ledger.passes(getattr(self, "_flor_sink", None), str(tag)):
                return None
        _inside.call = True
        try:
            return add(self, *args, **kwargs)
        finally:
            _inside.call = False

    return added
