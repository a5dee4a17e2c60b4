"""What a script sends to its trackers, and what a replay lets through.

A *sink* is where a tracker keeps one run's values: an MLflow run, a TensorBoard log
directory, a W&B run. The script opens its sinks in an order (``mlflow.start_run``,
``SummaryWriter()``, ``wandb.init``) that a replay of it repeats, so the k-th sink a replay opens is the k-th the recording
opened. A recording notes each sink and the keys sent to it (``Ledger.recording``); the run
keeps them (``RunMeta.trackers``). A replay (``Ledger.replaying``) opens the recorded sink
instead of a new one and lets a value through only where the recording sent nothing under
its key (a hindsight value) and the iteration is shown, not run quietly to rebuild state:
the tracker gets each hindsight value once, beside the recorded ones, whatever the
replay's segments. A resumed recording (``Ledger.resuming``) goes on with the recorded
sinks and sends what the iterations after its checkpoint send.

What a replay cannot map (a sink the recording did not note: it was killed before its end,
or recorded before flor noted trackers) gets nothing, and the replay says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

RECORD, REPLAY, RESUME = "record", "replay", "resume"


@dataclass
class Sink:
    kind: str  # "mlflow", "tensorboard", "wandb"
    id: str  # an MLflow run id, a log directory, a W&B run id
    keys: set[str] = field(default_factory=set)  # sent to it by the recording
    sent: dict[str, int] = field(default_factory=dict)  # by this process: key -> values


class Ledger:
    def __init__(
        self,
        mode: str,
        recorded: Mapping[str, Any] | None = None,
        quiet: Callable[[], bool] = lambda: False,
        replay_id: str | None = None,
        iteration: Callable[[], int | None] = lambda: None,
    ) -> None:
        self.mode = mode
        self.quiet = quiet  # the open iteration is run without output
        self.replay_id = replay_id
        self.iteration = iteration  # the open iteration (a replay's values carry it to W&B)
        self.recorded: dict[str, list[Sink]] = {
            kind: [Sink(kind, s["id"], set(s.get("keys", ()))) for s in sinks]
            for kind, sinks in (recorded or {}).items()
        }
        self.opened: dict[str, list[Sink | None]] = {}  # by this process, in order
        self.unmapped: set[str] = set()  # kinds whose sinks the recording did not note

    @classmethod
    def recording(cls, quiet: Callable[[], bool] = lambda: False) -> Ledger:
        return cls(RECORD, quiet=quiet)

    @classmethod
    def replaying(
        cls,
        recorded: Mapping[str, Any],
        quiet: Callable[[], bool],
        replay_id: str,
        iteration: Callable[[], int | None],
    ) -> Ledger:
        return cls(REPLAY, recorded, quiet, replay_id, iteration)

    @classmethod
    def resuming(cls, recorded: Mapping[str, Any], quiet: Callable[[], bool]) -> Ledger:
        return cls(RESUME, recorded, quiet)

    # -- sinks -------------------------------------------------------------------
    def recorded_sink(self, kind: str) -> Sink | None:
        """The sink the recording opened where this process opens its next one of ``kind``
        (None: recording it, or not noted: ``unmapped``)."""
        opened = self.opened.setdefault(kind, [])
        if self.mode == RECORD:
            return None
        recorded = self.recorded.get(kind, [])
        sink = recorded[len(opened)] if len(opened) < len(recorded) else None
        opened.append(sink)
        if sink is None:
            self.unmapped.add(kind)
        return sink

    def opened_sink(self, kind: str, sink_id: str) -> Sink:
        """A recording opened sink ``sink_id`` (again: the same one)."""
        opened = self.opened.setdefault(kind, [])
        for sink in opened:
            if sink is not None and sink.id == sink_id:
                return sink
        sink = Sink(kind, sink_id)
        opened.append(sink)
        return sink

    # -- values ------------------------------------------------------------------
    def passes(self, sink: Sink | None, key: str) -> bool:
        """Whether a value under ``key`` goes to ``sink`` now; noted where it does."""
        if self.quiet():
            return False
        if self.mode == RECORD:
            if sink is not None:
                sink.keys.add(key)
            return True
        if sink is None:
            return False
        if self.mode == REPLAY and key in sink.keys:
            return False  # the recording sent it
        if self.mode == RESUME:
            sink.keys.add(key)  # the run's own, from here on
        sink.sent[key] = sink.sent.get(key, 0) + 1
        return True

    # -- the end -----------------------------------------------------------------
    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        """The sinks a recording opened and the keys sent to each (a resumed one: its own and
        those of the attempts before)."""
        out: dict[str, list[dict[str, Any]]] = {}
        kinds = {*self.recorded, *self.opened}
        for kind in sorted(kinds):
            sinks = list(self.recorded.get(kind, []))
            for sink in self.opened.get(kind, []):
                if sink is not None and all(s.id != sink.id for s in sinks):
                    sinks.append(sink)
            out[kind] = [{"id": s.id, "keys": sorted(s.keys)} for s in sinks]
        return out

    def sent(self) -> dict[str, dict[str, dict[str, int]]]:
        """What this process sent: kind -> sink -> key -> values."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for kind, sinks in self.opened.items():
            for sink in sinks:
                if sink is not None and sink.sent:
                    out.setdefault(kind, {})[sink.id] = dict(sink.sent)
        return out

    def said(self) -> list[str]:
        """A replay's lines on what it sent where (and what it could not)."""
        lines = sent_lines([self.sent()])
        for kind in sorted(self.unmapped):
            lines.append(
                f"the recording noted no {SINKS[kind]} where the script opens one now (it did "
                "not end, or flor did not note trackers then): nothing sent to it"
            )
        return lines


SINKS = MappingProxyType(
    {"mlflow": "MLflow run", "tensorboard": "TensorBoard log directory", "wandb": "W&B run"}
)
NAMES = MappingProxyType(  # where a replay sent values, said
    {
        "mlflow": "MLflow run {}",
        "tensorboard": "TensorBoard log directory {}",
        "wandb": "a W&B offline run linked to run {} (in its group; `wandb sync` uploads it)",
    }
)


def sent_lines(sent: list[Mapping[str, Mapping[str, Mapping[str, int]]]]) -> list[str]:
    """What one replay's processes (``Ledger.sent`` each) sent, a line per sink."""
    total: dict[tuple[str, str], dict[str, int]] = {}
    for part in sent:
        for kind, sinks in part.items():
            for sink, keys in sinks.items():
                counts = total.setdefault((kind, sink), {})
                for key, n in keys.items():
                    counts[key] = counts.get(key, 0) + n
    return [
        f"sent {sum(keys.values())} hindsight values ({', '.join(sorted(keys))}) to "
        f"{NAMES[kind].format(sink)}; none of the recorded ones again"
        for (kind, sink), keys in sorted(total.items())
    ]
