"""One piece of a replay spread over processes, replayed by a worker from a frozen job.

A parallel replay (``--workers K``) or a replay of several runs (``--runs``) decides
everything once, in its parent: which run, which segment, the replay id, the options
and, for the segments of one run, the edited script already rewritten. It hands each
worker a ``WorkerJob``; the worker replays it in its own process (never forked from a
training process) and hands back an ``Outcome``: the segment's result, or its exit
status. Nothing goes back through the command line, and the run is loaded once, by
the parent.

The hand-over is a pickle in a private folder (``hand_over``/``taken_over``). A local
worker starts before its job is ready: rewriting the edit takes about as long as
importing torch, so the parent rewrites while its workers import torch, then writes
their jobs. A Ray task writes its job, which Ray shipped, for a worker process of its own.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from flor import runs
from flor.errors import DIVERGED, FlorError
from flor.launch import process_end
from flor.launch.replay import Prepared, ReplayRequest, prepare, replayed_here
from flor.launch.startup import while_torch_imports
from flor.replay.ray_backend import SegmentFailed
from flor.runs.records import SegmentResult
from flor.runtime.process.reporter import Reporter
from flor.store import StoreSettings


@dataclass(frozen=True)
class WorkerJob:
    """What one worker replays: ``request`` (its run, segment and replay id) of ``run`` (None:
    the worker reads the run's journal itself); ``prepared``: the parent's rewrite of the
    edit and options, ready to run (None: the worker prepares the request itself, as for a
    version of ``--runs``, whose files it is given)."""

    store_url: str
    request: ReplayRequest
    run: runs.RecordedRun | None
    prepared: Prepared | None = None


@dataclass(frozen=True)
class Outcome:
    """What a worker hands back: its exit status and, if it got that far, its result."""

    exit_status: int
    result: SegmentResult | None


def command(folder: str, index: int) -> list[str]:
    """The worker process for job ``index`` of ``folder``."""
    return [sys.executable, "-m", "flor.launch.worker", folder, str(index)]


def job_path(folder: str, index: int) -> str:
    return os.path.join(folder, f"job-{index}.pickle")


def outcome_path(folder: str, index: int) -> str:
    return os.path.join(folder, f"outcome-{index}.pickle")


def work(job: WorkerJob, reporter: Reporter) -> Outcome:
    """Replay ``job`` in this process."""
    store = runs.open_store(job.store_url, StoreSettings.from_env(os.environ), warn=reporter.warn)
    prepared = job.prepared or prepare(
        job.request, store, reporter, os.environ, True, recorded=job.run
    )
    return Outcome(*replayed_here(prepared, store, reporter))


def on_ray(job: WorkerJob) -> SegmentResult:
    """A Ray task's body: replay ``job`` in a worker process of its own; its result, or
    ``SegmentFailed`` with its exit status and stderr (so that Ray retries it)."""
    with tempfile.TemporaryDirectory(prefix="flor-worker-") as folder:
        hand_over(job_path(folder, 1), job)
        proc = subprocess.run(
            command(folder, 1), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        outcome = taken_outcome(folder, 1, proc.returncode)
    if outcome.result is None or outcome.exit_status not in (0, DIVERGED):
        raise SegmentFailed(outcome.exit_status, proc.stderr)  # diverged: its result says where
    return outcome.result


def taken_outcome(folder: str, index: int, exit_status: int) -> Outcome:
    """What worker ``index`` handed back; its exit status alone if it died before."""
    if not os.path.exists(outcome_path(folder, index)):
        return Outcome(exit_status, None)
    with open(outcome_path(folder, index), "rb") as f:
        outcome: Outcome = pickle.load(f)
    return outcome


def hand_over(path: str, value: Any) -> None:
    """Write ``value`` for another process; it sees the whole file or none of it."""
    with open(f"{path}.tmp", "wb") as f:
        pickle.dump(value, f)
    os.replace(f"{path}.tmp", path)


def taken_over(path: str, parent: int, poll: float = 0.01) -> Any:
    """What the process ``parent`` handed over at ``path``, waited for; a one-line error if
    the parent ends first (it stops its workers when it refuses an edit)."""
    while not os.path.exists(path):
        try:
            os.kill(parent, 0)
        except (ProcessLookupError, PermissionError):  # gone (its pid another user's now)
            raise FlorError(
                "no-parent", "the parallel replay that started this worker has ended"
            ) from None
        time.sleep(poll)
    with open(path, "rb") as f:
        return pickle.load(f)  # the parent's own file, in a folder only this user reads


def main(folder: str, index: int) -> None:
    """The worker process: wait for job ``index`` (importing torch meanwhile), replay it,
    hand its outcome back, and end as the ``flor`` command does."""
    reporter = Reporter()
    parent = os.getppid()
    try:
        job = while_torch_imports(lambda _: taken_over(job_path(folder, index), parent), reporter)
        outcome = work(job, reporter)
    except FlorError as e:
        reporter.error(e.message)
        outcome = Outcome(e.exit_code, None)
    hand_over(outcome_path(folder, index), outcome)
    process_end.end(outcome.exit_status)


if __name__ == "__main__":  # what it hands back must be pickled as this module's, not __main__'s
    from flor.launch import worker

    worker.main(sys.argv[1], int(sys.argv[2]))
