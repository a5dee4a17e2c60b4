"""MLflow's fluent API under a session's ``Ledger``: ``start_run`` opens the recorded run in a
replay (no new run), ``end_run`` leaves its status as it was, and what is logged
(metrics, params, tags, artifacts by file name) goes through ``Ledger.passes``, tagged with
the replay's id where hindsight values reach the run."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from types import MappingProxyType, SimpleNamespace
from typing import Any

from flor.runtime.trackers.ledger import RECORD, REPLAY, Ledger, Sink

KIND = "mlflow"


def patch(mlflow: Any, current: Callable[[], Ledger | None]) -> None:
    """``mlflow``: the module (Any: a typed mlflow need not be installed); ``current``: the
    session's ledger."""
    if getattr(mlflow, "_flor_patched", False):
        return
    mlflow._flor_patched = True
    fluent = mlflow.tracking.fluent
    state = _Runs(mlflow, current)
    mlflow.start_run = fluent.start_run = state.start_run
    mlflow.end_run = fluent.end_run = state.end_run
    for name, keys in _LOGGING.items():
        if hasattr(mlflow, name):
            setattr(mlflow, name, state.logging(getattr(mlflow, name), keys))


class _Runs:
    def __init__(self, mlflow: Any, current: Callable[[], Ledger | None]) -> None:
        self.mlflow = mlflow
        self.ledger = current
        self._start, self._end = mlflow.start_run, mlflow.end_run
        self.status: dict[str, str] = {}  # a replay: the status each run had before it
        self.tagged: set[str] = set()

    def start_run(self, *args: Any, **kwargs: Any) -> Any:
        ledger = self.ledger()
        if ledger is None or ledger.mode == RECORD:
            run = self._start(*args, **kwargs)
            if ledger is not None:
                ledger.opened_sink(KIND, run.info.run_id)
            return run
        sink = ledger.recorded_sink(KIND)
        if sink is None:
            return _Unmapped()
        if ledger.mode == REPLAY:
            self.status[sink.id] = self.mlflow.MlflowClient().get_run(sink.id).info.status
        return self._start(run_id=sink.id, nested=kwargs.get("nested", False))

    def end_run(self, status: str = "FINISHED") -> None:
        run = self.mlflow.active_run()
        if run is not None:  # a replay leaves the recorded run's status as it was
            status = self.status.get(run.info.run_id, status)
        self._end(status)

    def sink(self, ledger: Ledger) -> Sink | None:
        """The sink of the active run; where none is active, the one a log call starts."""
        run = self.mlflow.active_run()
        if ledger.mode == RECORD:
            if run is None:
                run = self._start()  # as the log call would: its implicit run
            return ledger.opened_sink(KIND, run.info.run_id)
        if run is None:
            if self.start_run() is None or self.mlflow.active_run() is None:
                return None
            run = self.mlflow.active_run()
        for sink in ledger.opened.get(KIND, []):
            if sink is not None and sink.id == run.info.run_id:
                return sink
        return None

    def logging(self, log: Callable[..., Any], keys: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(log)
        def logged(*args: Any, **kwargs: Any) -> Any:
            ledger = self.ledger()
            if ledger is None:
                return log(*args, **kwargs)
            sink = self.sink(ledger)
            kept = keys(ledger, sink, args, kwargs)
            if kept is None:
                return None
            if ledger.mode == REPLAY and sink is not None and sink.id not in self.tagged:
                self.tagged.add(sink.id)
                self.mlflow.MlflowClient().set_tag(
                    sink.id, f"flor.replay.{ledger.replay_id}", "hindsight values of a flor replay"
                )
            return log(*kept[0], **kept[1])

        return logged


Call = tuple[tuple[Any, ...], dict[str, Any]]


def _one(prefix: str, name: str) -> Callable[..., Call | None]:
    """A call that sends one value under its first argument (or ``name=``)."""

    def keys(ledger: Ledger, sink: Sink | None, args: Any, kwargs: Any) -> Call | None:
        key = args[0] if args else kwargs.get(name)
        return (args, kwargs) if ledger.passes(sink, f"{prefix}{key}") else None

    return keys


def _many(prefix: str, name: str) -> Callable[..., Call | None]:
    """A call that sends a dict of values: only those that pass are sent."""

    def keys(ledger: Ledger, sink: Sink | None, args: Any, kwargs: Any) -> Call | None:
        values = args[0] if args else kwargs.pop(name)
        kept = {k: v for k, v in values.items() if ledger.passes(sink, f"{prefix}{k}")}
        return ((kept, *args[1:]), kwargs) if kept else None

    return keys


def _artifact(position: int, name: str) -> Callable[..., Call | None]:
    """A call that writes one artifact file, named by its argument ``position`` (``name=``)."""

    def keys(ledger: Ledger, sink: Sink | None, args: Any, kwargs: Any) -> Call | None:
        where = args[position] if len(args) > position else kwargs.get(name)
        key = f"artifact:{os.path.basename(str(where))}"
        return (args, kwargs) if ledger.passes(sink, key) else None

    return keys


_LOGGING = MappingProxyType(
    {
        "log_metric": _one("", "key"),
        "log_metrics": _many("", "metrics"),
        "log_param": _one("param:", "key"),
        "log_params": _many("param:", "params"),
        "set_tag": _one("tag:", "key"),
        "set_tags": _many("tag:", "tags"),
        "log_artifact": _artifact(0, "local_path"),
        "log_dict": _artifact(1, "artifact_file"),
        "log_text": _artifact(1, "artifact_file"),
        "log_figure": _artifact(1, "artifact_file"),
        "log_image": _artifact(1, "artifact_file"),
    }
)


class _Unmapped:
    """What ``start_run`` gives a replay where the recording noted no run: nothing is sent."""

    info = SimpleNamespace(run_id=None, run_name=None, status="FLOR_REPLAY")
    data = SimpleNamespace(metrics={}, params={}, tags={})

    def __enter__(self) -> _Unmapped:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
