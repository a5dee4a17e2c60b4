"""What a user typed, checked: names, segments, budgets, restore modes, a script's path.

Each check returns the value or raises a one-line ``FlorError``; below every floor, so the
``flor`` command, ``import flor``'s legacy flags and the runtime read them alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from flor.errors import FlorError

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


def parse_fork_point(text: str) -> tuple[str, int]:
    """``"RUN@K"`` -> ``(RUN, K)``: a recorded run (its id, or ``latest``) and one of its
    iterations; a one-line FlorError for anything else."""
    run, at, iteration = text.strip().rpartition("@")
    if not at or not run or not iteration.isdigit():
        raise FlorError(
            "bad-fork",
            f"--from {text!r}: give RUN@ITERATION, a run of the experiment (its id, or latest) "
            "and one of its checkpointed iterations (e.g. latest@9)",
        )
    return run, int(iteration)


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
