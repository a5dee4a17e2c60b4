"""The records a run is made of, typed: what its JSON files hold, and nothing else.

Each record reads itself from JSON (``from_json``) and writes itself back
(``to_json``) in the format the store has held, so runs recorded before these
types existed still load: fields a record does not know are kept in ``extra``
and written back, and fields it lacks take defaults. Changes since: timings
are written as ``timings_us`` (whole microseconds; ``timings`` in seconds still
loads), and a recorder's timings and loop counters in the compact forms of ``series``
(the per-iteration objects they replaced still load).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar

from flor.runs.series import CounterRuns, Timings

R = TypeVar("R", bound="_Record")


@dataclass(frozen=True)
class _Record:
    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True)

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        data = _in_seconds(data)
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: cls._decode(k, v) for k, v in data.items() if k in known}
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        return value

    # Fields newer than the format: written only when they hold something, so that an
    # older record reads and writes back byte for byte.
    _newer: ClassVar[frozenset[str]] = frozenset()

    def to_json(self) -> dict[str, Any]:
        out = dict(self.extra)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (f.name in self._newer and _is_default(f, value)):
                continue
            if f.name in _MICROSECONDS:
                out[f"{f.name}_us"] = (
                    value.to_json()
                    if type(value) is Timings
                    else {k: round(v * 1e6) for k, v in value.items()}
                )
            elif f.name in _PER_ITERATION and type(value) is dict:
                out[f.name] = value  # {iteration: number or plain dict}: json writes it as is
            else:
                out[f.name] = _jsonable(value)
        return out


def _is_default(f: Field[Any], value: Any) -> bool:
    if f.default is not MISSING:
        return bool(value == f.default)
    if f.default_factory is MISSING:
        return False
    default = f.default_factory()
    if not default:  # an empty container: not compared item by item (series are long)
        return not value and type(value) is type(default)
    return bool(value == default)


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: Any) -> Any:
    # Exact types first: a commit converts every iteration's timings and scalars since the
    # previous one, and abc checks on each of those values were most of a commit's cost.
    if type(value) in _JSON_SCALARS:
        return value
    if type(value) is dict:
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (_Record, CounterRuns)):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


_PER_ITERATION = frozenset({"timings", "block_timings", "scalars"})
# Seconds per iteration, stored as whole microseconds under NAME_us: an int is written
# several times faster than a float's shortest repr, for every iteration of a run.
_MICROSECONDS = frozenset({"timings", "block_timings"})


def _in_seconds(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``data`` with its NAME_us fields as NAME, in seconds (entries written before them
    hold seconds already)."""
    stored = {f"{name}_us": name for name in _MICROSECONDS if f"{name}_us" in data}
    if not stored:
        return data
    out = {k: v for k, v in data.items() if k not in stored}
    for key, name in stored.items():
        value = data[key]
        if type(value) is list:  # consecutive iterations (series.Timings)
            out[name] = Timings.from_json(value)
        else:
            out[name] = {k: v / 1e6 for k, v in value.items()}
    return out


def _by_iteration(value: Any) -> Mapping[int, Any]:
    if type(value) is Timings:
        return value
    if "iterations" in value:  # series.CounterRuns (the older form's keys are iterations)
        return CounterRuns.from_json(value)
    return {int(k): v for k, v in value.items()}


@dataclass(frozen=True)
class RunMeta(_Record):
    """``run.json``: what was run and how it ended (rewritten at the end of the run)."""

    name: str = ""
    run_id: str = ""
    script: str | None = None
    argv: tuple[str, ...] = ()
    cwd: str = ""
    started: float = 0.0
    ended: float | None = None
    python: str = ""
    platform: str = ""
    epsilon: float = 0.0
    storage_budget: str = ""  # as the user gave it (older records: none)
    status: str = "running"
    exit_status: int | None = None
    instrumented: bool = False  # `flor run` rewrote the script; original.py holds the user's
    module: str | None = None  # run as `python -m MODULE` (script is its file)
    rank: int = 0  # of a distributed job: this journal's rank, of world_size processes
    world_size: int = 1
    launcher: str | None = None  # of a distributed job: torchrun, or the script's mp.spawn
    git_commit: str | None = None
    numerics: Mapping[str, Any] = field(default_factory=dict)
    iterations: int = 0
    checkpoints: int = 0  # taken
    thinned: int = 0  # of which deleted again to stay within the storage budget
    checkpoint_bytes: int = 0
    stored_bytes: int = 0
    compute_seconds: float = 0.0
    overhead: float = 0.0  # everything flor charged, over budgeted_seconds (else compute's)
    budgeted_seconds: float = 0.0  # compute, or the script's start-up where that was larger
    setup_seconds: float = 0.0  # of which flor's start-up
    bookkeeping_seconds: float = 0.0  # and its work in every iteration, and journaling them
    stall_seconds: tuple[float, ...] = ()
    # the budget allowed these, but the writer still held max_bytes of earlier ones
    skipped_behind: int = 0
    warnings: tuple[str, ...] = ()
    # the functions flor.callback noted (handed to the project's own code): which blocks
    # ran them is in each commit's ``called``
    callbacks: tuple[str, ...] = ()
    host: str = ""  # where it records, and its process: a resume must not run beside it
    pid: int = 0
    # each time the run was resumed: the iteration it went on from, and when
    resumed: tuple[tuple[int, float], ...] = ()
    # the script's set-up values of its optimizers and schedulers, noted as its loop began
    # (runtime.state.settings; None: not noted, an older recording)
    settings: Mapping[str, Mapping[str, Any]] | None = None
    parent: str | None = None  # a fork: the run of the same name it went on from,
    forked_at: int | None = None  # after this iteration of it (restored from its checkpoint)
    fork_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # which won
    # where the script sent values (runtime.trackers.ledger): each tracker's sinks, in the
    # order it opened them, and the keys sent to each
    trackers: Mapping[str, Any] = field(default_factory=dict)
    _newer = frozenset(
        {
            "settings",
            "parent",
            "forked_at",
            "fork_settings",
            "trackers",
            "host",
            "pid",
            "resumed",
            "callbacks",
            "skipped_behind",
            "storage_budget",
            "thinned",
            "setup_seconds",
            "bookkeeping_seconds",
            "module",
            "rank",
            "world_size",
            "launcher",
            "budgeted_seconds",
        }
    )

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        if name == "resumed":
            return tuple((int(g), float(t)) for g, t in value)
        return tuple(value) if name in ("argv", "stall_seconds", "warnings") else value

    def updated(self, **changes: Any) -> RunMeta:
        return replace(self, **changes)

    @property
    def checkpoint_seconds(self) -> float:
        """What the checkpoints cost: the overhead, less start-up and bookkeeping."""
        spent = self.overhead * (self.budgeted_seconds or self.compute_seconds)
        return max(spent - self.setup_seconds - self.bookkeeping_seconds, 0.0)

    def overhead_parts(self) -> str:
        """What the overhead is made of, all of it charged to the budget."""
        return (
            f"start-up {self.setup_seconds:.2f} s, checkpoints {self.checkpoint_seconds:.2f} s "
            f"and per-iteration bookkeeping {self.bookkeeping_seconds:.2f} s, of a "
            f"{self.epsilon:.2%} budget; of {self.compute_seconds:.1f} s of training{self._startup()}"
            f"{self._over()}"
        )

    def _over(self) -> str:
        """Why the overhead exceeds the budget, where it does: what no budget can skip."""
        if self.overhead <= self.epsilon * 1.001:
            return ""
        parts = {
            "flor's start-up": self.setup_seconds,
            "the first checkpoint, always taken": self.checkpoint_seconds,
            "per-iteration bookkeeping": self.bookkeeping_seconds,
        }
        return f"; over the budget because of {max(parts, key=parts.__getitem__)}, charged whole"

    def _startup(self) -> str:
        share = self.budgeted_seconds - self.compute_seconds
        return f" and {share:.1f} s of the script's start-up" if share >= 0.05 else ""


@dataclass(frozen=True)
class CheckpointEntry(_Record):
    """One block's checkpoint, as its iteration's commit records it."""

    key: str
    sha256: str
    bytes: int
    blobs: Mapping[str, int] = field(default_factory=dict)  # tensor blob sha256 -> bytes
    new_blob_bytes: int = 0  # blob bytes the store did not hold before
    objs: int | None = None  # positional values of SkipBlock.end (None: an older record)
    holds: tuple[str, ...] | None = None  # values held by name (None: an older record)
    bound: tuple[str, ...] | None = None  # names bound in the scope at the end of the block
    copied_from: str | None = None  # a fork's first: the parent's checkpoint, whose key it holds
    _newer = frozenset({"copied_from"})

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        return tuple(value) if name in ("holds", "bound") and value is not None else value

    @property
    def logical(self) -> int:
        """The bytes it holds: its manifest and every blob it points at, shared or not."""
        return self.bytes + sum(self.blobs.values())


@dataclass(frozen=True)
class Commit(_Record):
    """``journal/ITER.json``: iteration ITER's checkpoints exist (written after their data)."""

    iteration: int
    blocks: Mapping[str, CheckpointEntry] = field(default_factory=dict)  # "name/occurrence"
    # What each iteration since the previous entry printed ("ITER"; blocks also "ITER:BLOCK/N")
    stdout: Mapping[str, str] = field(default_factory=dict)
    timings: Mapping[int, float] = field(default_factory=dict)  # seconds per iteration
    block_timings: Mapping[int, float] = field(default_factory=dict)  # of which in blocks
    scalars: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)  # loop_scalars
    called: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # block -> callbacks run
    stderr: Mapping[str, str] = field(default_factory=dict)  # as stdout
    _newer = frozenset({"scalars", "called", "stderr"})

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        if name == "called":
            return {block: tuple(names) for block, names in value.items()}
        if name == "blocks":
            return {k: CheckpointEntry.from_json(v) for k, v in value.items()}
        return _by_iteration(value) if name in _PER_ITERATION else value


@dataclass(frozen=True)
class LoopEnd(_Record):
    """``journal/loop-N.json``: the N-th ``flor.it`` loop ended."""

    loop: int
    first: int  # its first iteration, numbered across the run's loops
    count: int
    status: str = "exhausted"  # or "closed": a break, or an exception in the body
    stdout: Mapping[str, str] = field(default_factory=dict)
    timings: Mapping[int, float] = field(default_factory=dict)
    block_timings: Mapping[int, float] = field(default_factory=dict)
    scalars: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    called: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # as a Commit's
    stderr: Mapping[str, str] = field(default_factory=dict)
    _newer = frozenset({"scalars", "called", "stderr"})

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        if name == "called":
            return {block: tuple(names) for block, names in value.items()}
        return _by_iteration(value) if name in _PER_ITERATION else value

    @property
    def end(self) -> int:
        return self.first + self.count


@dataclass(frozen=True)
class SegmentResult(_Record):
    """``replays/ID/segment-I-of-N.json``: what one segment of a replay printed and logged."""

    run_id: str
    segment: tuple[int, int]
    iterations: tuple[int, ...]
    probed: tuple[str, ...] = ()
    output: Mapping[str, str] = field(default_factory=dict)  # "pre", each iteration, "post"
    logs: tuple[Mapping[str, Any], ...] = ()
    finished: float = 0.0
    diverged: str = ""  # where a re-executed block first ended away from its checkpoint
    # a shown iteration whose blocks did not all restore -> why (flor.replay.decide's reason)
    reexecuted: Mapping[int, str] = field(default_factory=dict)
    # what it sent the script's trackers: kind -> sink -> key -> values (runtime.trackers)
    sent: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    stderr: Mapping[str, str] = field(default_factory=dict)  # as ``output``, of stderr
    _newer = frozenset({"reexecuted", "sent", "stderr"})

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        if name == "reexecuted":
            return {int(g): why for g, why in value.items()}
        return tuple(value) if name in ("segment", "iterations", "probed", "logs") else value
