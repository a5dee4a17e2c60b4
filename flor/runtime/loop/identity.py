"""A recording's ``run.json`` as it starts: a new run's identity, a resumed run's, or a
fork's (a new run that goes on from another's checkpoint)."""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flor.runs.records import Commit, RunMeta
from flor.runtime.process.options import Options

if TYPE_CHECKING:
    from flor.runtime.process.job import Job


def new_meta(options: Options, run_id: str, rank: int, job: Job | None) -> RunMeta:
    """What a new run says of itself before its first iteration."""
    return RunMeta(
        name=options.name,
        run_id=run_id,
        script=options.script,
        argv=tuple(options.argv if options.argv is not None else sys.argv),
        cwd=os.getcwd(),
        started=time.time(),
        python=platform.python_version(),
        platform=platform.platform(),
        epsilon=options.epsilon,
        storage_budget=options.storage.text,
        instrumented=options.original is not None,
        module=options.module,
        rank=rank,
        world_size=job.world_size if job else 1,
        launcher=job.launcher if job else None,
        git_commit=_git_commit(options.script),
        host=platform.node(),
        pid=os.getpid(),
    )


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork goes on from: iteration ``at`` of run ``parent`` (its ``commit``), with
    today's set-up values (``setup``) and those of them that won over the checkpoint's
    (``wins``; ``runtime.state.settings``)."""

    parent: str
    at: int
    commit: Commit
    setup: dict[str, dict[str, Any]]
    wins: dict[str, dict[str, Any]]


def forked_meta(options: Options, run_id: str, fork: ForkPoint) -> RunMeta:
    """A new run that goes on from ``fork``."""
    return new_meta(options, run_id, 0, None).updated(
        parent=fork.parent, forked_at=fork.at, settings=fork.setup, fork_settings=fork.wins
    )


def resumed_meta(recorded: RunMeta, options: Options, after: int) -> RunMeta:
    """``recorded`` going on after its iteration ``after``, recorded by this process."""
    return recorded.updated(
        status="running",
        exit_status=None,
        ended=None,
        epsilon=options.epsilon,  # this recording's budget, as its policy spends it
        storage_budget=options.storage.text,
        host=platform.node(),
        pid=os.getpid(),
        resumed=(*recorded.resumed, (after + 1, time.time())),
    )


def _git_commit(script: str | None) -> str | None:
    """The commit of the repository the script lives in, if any (for run identity)."""
    import subprocess

    folder = os.path.dirname(os.path.abspath(script)) if script else os.getcwd()
    try:
        out = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
