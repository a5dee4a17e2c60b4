"""What a process was asked to do: ``Options``.

A leaf module: the ``flor`` command and ``import flor`` (hand-annotated scripts'
``--flor``/``--replay_flor`` flags) build ``Options`` from checked inputs
(``flor.inputs``); the sessions read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flor.inputs import DEFAULT_EPSILON, DEFAULT_STORAGE, StorageBudget, parse_storage
from flor.sources import ProjectFile


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
    resume_from: int | None = None  # record: go on with run ``run_id`` after this iteration
