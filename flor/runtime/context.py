"""The one run context of a process: what flor was asked to do, and the session doing it.

Options come from the environment (``FLOR_*``, set by the ``flor`` command) or
from the legacy flags of hand-annotated scripts (``--flor NAME``,
``--replay_flor [I/N]``), which are removed from ``sys.argv`` before the
script's own parser runs. Without either, flor is off and every API call is a
no-op. Sessions import torch, so they are imported only when a run is active.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from flor.errors import FlorError
from flor.store import STORE_ENV

if TYPE_CHECKING:
    from flor.runtime.session import Session

DEFAULT_EPSILON = 1 / 15
_SEGMENT = re.compile(r"^(\d+)/(\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Options:
    """What this process was asked to do. ``mode`` is ``off``, ``record`` or ``replay``."""

    mode: str = "off"
    name: str | None = None
    run_id: str | None = None  # replay: which recorded run (default: the latest)
    segment: tuple[int, int] = (1, 1)
    iterations: str | None = None  # replay: "9" or "0-4,10"
    epsilon: float = DEFAULT_EPSILON
    store: str | None = None  # the store's URL (default: FLOR_STORE, FLOR_HOME, ~/.flor)
    script: str | None = None
    replay_id: str | None = None  # shared by the segments of one parallel replay
    verify: int = 0  # replay: re-execute this many checkpointed blocks just to compare
    source: str | None = None  # the code actually run, when it is not the file (flor run)
    original: str | None = None  # the user's unmodified script, when flor rewrote it
    argv: tuple[str, ...] | None = None  # the script's argv, when sys.argv is flor's own


def parse_segment(text: str) -> tuple[int, int]:
    """``"3/5"`` -> ``(3, 5)``; a one-line FlorError for anything else."""
    m = _SEGMENT.match(text.strip())
    if not m:
        raise FlorError("bad-segment", f"segment {text!r} is not of the form I/N (e.g. 2/4)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise FlorError("bad-segment", f"segment {i}/{n} is outside 1..{max(n, 1)}")
    return i, n


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise FlorError("bad-name", f"run name {name!r} must be letters, digits, '.', '_' or '-'")
    return name


def options_from_env(environ: dict[str, str] | os._Environ[str]) -> Options:
    """Read ``FLOR_MODE``, ``FLOR_NAME``, ``FLOR_RUN``, ``FLOR_SEGMENT``, ... ."""
    mode = environ.get("FLOR_MODE", "off")
    if mode not in ("off", "record", "replay"):
        raise FlorError("bad-mode", f"FLOR_MODE={mode!r} must be record or replay")
    if mode == "off":  # legacy flags may still start a run: keep home and epsilon
        return Options(store=store_url(environ), epsilon=parse_epsilon(environ.get("FLOR_EPSILON")))
    name = environ.get("FLOR_NAME")
    if not name:
        raise FlorError("no-name", f"FLOR_MODE={mode} needs FLOR_NAME")
    return Options(
        mode=mode,
        name=check_name(name),
        run_id=environ.get("FLOR_RUN") or None,
        segment=parse_segment(environ.get("FLOR_SEGMENT", "1/1")),
        iterations=environ.get("FLOR_ITERATIONS") or None,
        epsilon=parse_epsilon(environ.get("FLOR_EPSILON")),
        store=store_url(environ),
        script=environ.get("FLOR_SCRIPT"),
        replay_id=environ.get("FLOR_REPLAY_ID") or None,
    )


def store_url(environ: dict[str, str] | os._Environ[str]) -> str | None:
    return environ.get("FLOR_STORE") or environ.get("FLOR_HOME") or None


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


def strip_legacy_flags(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Remove ``--flor NAME`` and ``--replay_flor [I/N]`` from ``argv``.

    ``--flor`` takes exactly one value and ``--replay_flor`` at most one, and only
    when it looks like ``I/N``, so the script's own positional arguments after
    them stay where they were (``train.py --flor exp 8`` leaves ``8``).
    """
    kept: list[str] = [argv[0]] if argv else []
    found: dict[str, str] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--flor" or arg.startswith("--flor="):
            if "=" in arg:
                found["name"] = arg.split("=", 1)[1]
            elif i + 1 < len(argv):
                found["name"] = argv[i + 1]
                i += 1
            else:
                raise FlorError("no-name", "--flor needs a run name: --flor NAME")
        elif arg == "--replay_flor" or arg.startswith("--replay_flor="):
            if "=" in arg:
                found["segment"] = arg.split("=", 1)[1]
            elif i + 1 < len(argv) and "/" in argv[i + 1] and not argv[i + 1].startswith("-"):
                found["segment"] = argv[i + 1]
                i += 1
            else:
                found["segment"] = ""  # the whole run, or what a Slurm array/torchrun assigns
        else:
            kept.append(arg)
        i += 1
    if "segment" in found and "name" not in found:
        raise FlorError("no-name", "--replay_flor needs --flor NAME to say which run")
    return kept, found


def options_from_legacy(found: dict[str, str], base: Options, script: str) -> Options:
    segment, replay_id = found.get("segment") or "1/1", base.replay_id
    if found.get("segment") == "":
        from flor.runtime.cluster import segment_from_env

        assigned = segment_from_env()
        if assigned is not None:
            segment, replay_id = assigned.segment, replay_id or assigned.replay_id
    return replace(
        base,
        mode="replay" if "segment" in found else "record",
        name=check_name(found["name"]),
        segment=parse_segment(segment),
        script=script,
        replay_id=replay_id,
    )


_session: Session | None = None


def current() -> Session | None:
    """The active session, or ``None`` when flor is off."""
    return _session


def report_where() -> None:
    """After the user's traceback: one line saying where the session was (replay knows)."""
    where = _session.where() if _session is not None else None
    if where is not None:
        sys.stderr.write(f"flor: the error above happened {where}\n")
        sys.stderr.flush()


def _one_line_errors(previous: Any) -> Any:
    """A FlorError raised inside the user's script (a corrupt checkpoint) is a
    one-line message, not a traceback; the user's own exceptions are untouched."""

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if isinstance(value, FlorError):
            sys.stderr.write(f"flor: error: {value.message}\n")
        else:
            previous(kind, value, tb)
            report_where()

    return hook


def activate(options: Options) -> Session | None:
    """Start the session ``options`` ask for (at most one per process)."""
    global _session
    if options.mode == "off" or _session is not None:
        return _session
    sys.excepthook = _one_line_errors(sys.excepthook)
    if options.mode == "record":
        from flor.runtime.recorder import Recorder

        _session = Recorder(options)
    else:
        from flor.runtime.replayer import Replayer

        _session = Replayer(options)
    return _session


def activate_from_process() -> None:
    """Called once by ``import flor``: read the environment and legacy flags.

    ``FLOR_*`` variables are removed once read so that processes the script
    starts (DataLoader workers, subprocesses) do not start runs of their own.
    Errors are user mistakes: one line on stderr and exit status 2.
    """
    if multiprocessing.parent_process() is not None:
        return
    try:
        options = options_from_env(os.environ)
        argv, found = strip_legacy_flags(sys.argv)
        if found:
            sys.argv[:] = argv
            script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
            options = options_from_legacy(found, options, script)
        if options.mode != "off":  # a run starts here; processes it starts must not start their own
            for key in [k for k in os.environ if k.startswith("FLOR_") and k not in STORE_ENV]:
                del os.environ[key]
        activate(options)
    except FlorError as e:
        sys.stderr.write(f"flor: error: {e.message}\n")
        sys.stderr.flush()
        raise SystemExit(e.exit_code) from None
