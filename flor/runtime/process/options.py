"""What a process was asked to do: ``Options``, and the checks on what a user typed.

A leaf module: the ``flor`` command and ``import flor`` (hand-annotated scripts'
``--flor``/``--replay_flor`` flags) build ``Options``; the sessions read them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType

from flor.errors import FlorError
from flor.sources import ProjectFile

DEFAULT_EPSILON = 1 / 15
DEFAULT_STORAGE = "10GB"
_SEGMENT = re.compile(r"^(\d+)/(\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SIZE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?)b?\s*(/\s*h(?:our)?)?$", re.IGNORECASE)
_UNITS = MappingProxyType({"": 0, "k": 1, "m": 2, "g": 3, "t": 4})


@dataclass(frozen=True)
class StorageBudget:
    """What a run's checkpoints may keep in the store: ``nbytes`` in all, or per hour of
    training when ``per_hour`` (``None``: no limit). ``text`` is how the user wrote it."""

    nbytes: int | None
    per_hour: bool = False
    text: str = "unlimited"

    def limit(self, compute: float) -> float | None:
        """The bytes allowed after ``compute`` seconds of training."""
        if self.nbytes is None:
            return None
        return self.nbytes * compute / 3600 if self.per_hour else float(self.nbytes)


@dataclass(frozen=True)
class Options:
    """What this process was asked to do. ``mode`` is ``record`` or ``replay``."""

    mode: str
    name: str
    run_id: str | None = None  # replay: which recorded run (default: the latest)
    segment: tuple[int, int] = (1, 1)
    iterations: str | None = None  # replay: "9" or "0-4,10"
    epsilon: float = DEFAULT_EPSILON
    storage: StorageBudget = field(default_factory=lambda: parse_storage(DEFAULT_STORAGE))
    script: str | None = None
    module: str | None = None  # the script is this module, run as `python -m MODULE`
    replay_id: str | None = None  # shared by the segments of one parallel replay
    verify: int = 0  # replay: re-execute this many checkpointed blocks just to compare
    restore_always: bool = False  # replay: restore even blocks that run faster than a restore
    threads: int | None = None  # replay: torch threads (None: the recorded count, for parity)
    source: str | None = None  # the code actually run, when it is not the file (flor run)
    original: str | None = None  # the user's unmodified script, when flor rewrote it
    argv: tuple[str, ...] | None = None  # the script's argv, when sys.argv is flor's own
    project: tuple[ProjectFile, ...] = ()  # the project files the script imports, as they run
    spawned: bool = False  # the main loop runs in the processes the script's mp.spawn starts
    rank: int | None = None  # replay: which rank of a distributed run (--rank)
    segments_from_env: bool = False  # replay: torchrun's RANK/WORLD_SIZE name segments


def parse_segment(text: str) -> tuple[int, int]:
    """``"3/5"`` -> ``(3, 5)``; a one-line FlorError for anything else."""
    m = _SEGMENT.match(text.strip())
    if not m:
        raise FlorError("bad-segment", f"segment {text!r} is not of the form I/N (e.g. 2/4)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1:
        raise FlorError("bad-segment", f"segment {i}/{n}: a replay splits into at least 1 segment")
    if not 1 <= i <= n:
        raise FlorError("bad-segment", f"segment {i}/{n} is outside 1..{n}")
    return i, n


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise FlorError("bad-name", f"run name {name!r} must be letters, digits, '.', '_' or '-'")
    return name


def parse_epsilon(text: str | None) -> float:
    if text is None or text == "":
        return DEFAULT_EPSILON
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise FlorError("bad-epsilon", f"epsilon {text!r} must be a positive number")
    return value


def parse_restore(text: str | None) -> bool:
    """``FLOR_RESTORE``: ``auto`` (default) or ``always``; whether to restore always."""
    value = (text or "auto").strip().lower()
    if value not in ("auto", "always"):
        raise FlorError("bad-restore", f"FLOR_RESTORE={text!r}: use auto or always")
    return value == "always"


def parse_storage(text: str | None) -> StorageBudget:
    """``"10GB"``, ``"500MiB"``, ``"2GB/h"`` (per hour of training), ``"unlimited"``."""
    if text is None or not text.strip():
        text = DEFAULT_STORAGE
    text = text.strip()
    if text.lower() in ("unlimited", "none"):
        return StorageBudget(None)
    m = _SIZE.match(text)
    value = float(m.group(1)) if m else 0.0
    if not m or value <= 0:
        raise FlorError(
            "bad-storage",
            f"storage budget {text!r} is not a positive size such as 10GB, 500MiB or 2GB/h "
            "(or `unlimited`)",
        )
    base = 1024 if m.group(3) else 1000
    nbytes = int(value * base ** _UNITS[m.group(2).lower()])
    return StorageBudget(max(nbytes, 1), per_hour=bool(m.group(4)), text=text)


def read_script(path: str) -> str:
    """The script's text; a one-line FlorError if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise FlorError("no-script", f"cannot read {path}: {e.strerror}") from None
