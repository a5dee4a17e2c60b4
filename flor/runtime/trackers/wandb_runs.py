"""W&B under a session's ``Ledger``. A finished W&B run's history cannot be changed, so a
replay's hindsight values go to a run of their own, offline, linked to the recorded one: its
id is the recorded run's with ``-flor-REPLAY_ID`` after it, its group the recorded run's id,
its notes say so, and each value carries ``flor/iteration`` (the x-axis its charts use) and
the step the script gave, if any. `wandb sync` uploads it. Each replay process writes its own
directory of that run (W&B names one by the second it started, and a replay's workers start
together). A resumed recording goes on in the recorded run itself (``resume="allow"``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from flor.runtime.trackers.ledger import RECORD, REPLAY, RESUME, Ledger

KIND = "wandb"


def patch(wandb: Any, current: Callable[[], Ledger | None]) -> None:
    """``wandb``: the module (Any: it need not be installed); ``current``: the session's
    ledger."""
    if getattr(wandb, "_flor_patched", False):
        return
    wandb._flor_patched = True
    run_class = wandb.sdk.wandb_run.Run
    init, log = wandb.init, run_class.log

    @functools.wraps(init)
    def opened(*args: Any, **kwargs: Any) -> Any:
        ledger = current()
        if ledger is None or ledger.mode == RECORD:
            run = init(*args, **kwargs)
            if ledger is not None and getattr(run, "id", None):
                _keep(run, ledger.opened_sink(KIND, run.id))
            return run
        sink = ledger.recorded_sink(KIND)
        if sink is None:  # nothing reaches it
            run = init(*args, **{**kwargs, "mode": "disabled"})
        elif ledger.mode == RESUME:
            run = init(*args, **{**kwargs, "id": sink.id, "resume": "allow"})
        else:
            linked = _linked(sink.id, ledger.replay_id or "")
            settings = _own_directory(wandb, kwargs.get("settings"))
            run = init(*args, **{**kwargs, **linked, "settings": settings})
            run.define_metric("flor/iteration")
            run.define_metric("*", step_metric="flor/iteration")
        _keep(run, sink)
        return run

    @functools.wraps(log)
    def logged(self: Any, data: dict[str, Any], step: int | None = None, commit: Any = None) -> Any:
        ledger = current()
        if ledger is None:
            return log(self, data, step, commit)
        sink = getattr(self, "_flor_sink", None)
        kept = {k: v for k, v in data.items() if ledger.passes(sink, k)}
        if not kept:
            return None
        if ledger.mode == REPLAY:
            kept["flor/iteration"] = ledger.iteration()
        return log(self, kept, step, commit)

    wandb.init = opened
    run_class.log = logged


def _keep(run: Any, sink: Any) -> None:
    object.__setattr__(run, "_flor_sink", sink)  # past Run's own __setattr__, which refuses


def _own_directory(wandb: Any, settings: Any) -> Any:
    """The script's W&B settings, with a suffix of this process's own to its run's directory:
    two processes that open the same offline run in the same second write one file (W&B's
    own suffix sees only a directory that exists already). Unchanged where the installed W&B
    has no such setting."""
    if "x_sync_dir_suffix" not in getattr(wandb.Settings, "model_fields", {}):
        return settings
    suffix = {"x_sync_dir_suffix": f"flor-{os.getpid()}"}
    if settings is None:
        return wandb.Settings(**suffix)
    if isinstance(settings, dict):
        return {**settings, **suffix}
    return settings.model_copy(update=suffix)


def _linked(recorded: str, replay_id: str) -> dict[str, Any]:
    """``wandb.init``'s arguments for a replay's run of ``recorded``'s hindsight values."""
    return {
        "mode": "offline",
        "id": f"{recorded}-flor-{replay_id}",
        "resume": "allow",  # every segment of the replay writes to the one run
        "name": f"{recorded} (flor replay {replay_id})",
        "group": recorded,
        "notes": f"hindsight values of flor replay {replay_id} of W&B run {recorded}",
    }
