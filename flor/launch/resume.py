"""``flor run --resume``: go on with a run that did not finish, from its last checkpoint;
``flor run --from RUN@K``: fork a run at its checkpoint K with today's script.

A run killed (preempted, out of time, out of memory) or crashed holds the whole training
state at its checkpoints. Resuming runs the script again: the iterations up to the last
usable checkpoint K are replayed (those before K not run at all, K restored without output:
a replay segment's start), and from K + 1 on a recording goes on into the same run, its
journal continued. With the script unchanged, what follows is what the uninterrupted run
would have done. An edit that changes training (a block's code) is refused: resuming would
mix two trainings in one run: a fork is a new run for that. It goes on from the chosen
checkpoint the same way, applies the set-up values today's script changed (a learning rate,
a scheduler's gamma: ``runtime.state.settings``) and records the rest as a run of its own
that names its parent and fork point (``Forker``).

``unfinished`` finds the run a requeued job's command means: the newest run of the name,
script and arguments, if it did not finish.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from flor import runs
from flor.errors import FlorError
from flor.replay.session import Replayer
from flor.runs.records import RunMeta
from flor.runtime.journal.stdout_capture import Streams
from flor.runtime.loop.identity import ForkPoint
from flor.runtime.loop.recorder import Recorder
from flor.runtime.loop.session import Session, as_iterator
from flor.runtime.process.job import Job
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.runtime.state import settings
from flor.runtime.state.scope import Frame
from flor.runtime.trackers import Ledger
from flor.store import Store

MakeRecorder = Callable[[Options, RunMeta | None, ForkPoint | None], Recorder]


def unfinished(
    store: Store,
    options: Options,
    say: Callable[[str], None],
    environ: Mapping[str, str],
    run_id: str | None = None,
) -> runs.RecordedRun | None:
    """The newest run of ``options``' name, script and arguments if it did not finish and
    has a checkpoint to go on from (None, said, where there is none or it has none: a new
    run is recorded), or the run ``run_id`` (``flor resume --run``); a one-line error if it
    finished, may still be recording, or cannot be resumed (by as many processes as this
    job has: ``environ``'s torchrun, if any). In a torchrun job rank 0 decides, and the
    other ranks take its run."""
    job = Job.from_env(environ)
    if job is not None and job.rank > 0:
        chosen = job.wait("resume")
        if chosen.startswith("!"):  # rank 0 said why, for the job
            raise SystemExit(2)
        return runs.load_run(store, options.name, chosen) if chosen else None
    try:
        world_size = job.world_size if job else 1
        run: runs.RecordedRun | None
        if run_id is not None:
            run = _named(store, options.name, run_id, world_size)
        else:
            run = _newest_unfinished(store, options, say, world_size)
    except FlorError:
        if job is not None:
            job.share("resume", "!")
        raise
    if job is not None:
        job.share("resume", run.run_id if run else "")
    return run


def _named(store: Store, name: str, run_id: str, world_size: int) -> runs.RecordedRun:
    run = runs.load_run(store, name, run_id)
    where = f"run {name}/{run_id}"
    if run.meta.status == "finished":
        raise FlorError("nothing-to-resume", f"{where} finished: nothing to resume")
    _check_resumable(store, run, world_size)
    if not any(c.blocks for c in run.commits.values()):
        raise FlorError(
            "cannot-resume",
            f"{where} has no checkpoint to go on from: record it again with flor run",
        )
    return run


def _newest_unfinished(
    store: Store, options: Options, say: Callable[[str], None], world_size: int
) -> runs.RecordedRun | None:
    script, argv = options.script, tuple(options.argv or ())[1:]
    for run_id in reversed(runs.list_runs(store, options.name)):
        head = runs.load_head(store, options.name, run_id)
        if head.meta.script != script or tuple(head.meta.argv[1:]) != argv:
            continue
        if head.meta.status == "finished":
            raise FlorError(
                "nothing-to-resume",
                f"run {options.name}/{run_id} of this script and arguments finished: nothing "
                "to resume (without --resume, flor run records a new run)",
            )
        run = runs.load_run(store, options.name, run_id)
        _check_resumable(store, run, world_size)
        if any(c.blocks for c in run.commits.values()):
            return run
        say(f"run {run.name}/{run.run_id} has no checkpoint to go on from: recording a new run")
        return None
    say(f"no run of {options.name} with this script and arguments yet: recording a new one")
    return None


def fork_point(store: Store, name: str, run_id: str, at: int) -> runs.RecordedRun:
    """The run ``run_id`` of ``name`` (``latest``: the newest), checked to hold a checkpoint
    at iteration ``at`` to fork from; a one-line error where it does not."""
    run = runs.load_run(store, name, None if run_id == "latest" else run_id)
    where = f"run {name}/{run.run_id}"
    if run.meta.world_size > 1 or len(run.loops) > 1:
        why = "several processes" if run.meta.world_size > 1 else "several flor.it loops"
        raise FlorError("cannot-fork", f"{where} ran {why}: flor forks one loop of one process")
    if at >= run.iterations:
        raise FlorError(
            "no-checkpoint",
            f"{where} ran {run.iterations} iterations: there is no iteration {at}; "
            f"{nearest(run.commits, at)}",
        )
    if run.meta.forked_at is not None and at < run.meta.forked_at:
        raise FlorError(
            "no-checkpoint",
            f"{where} went on from run {run.meta.parent} at iteration {run.meta.forked_at}: "
            f"fork that run for iteration {at}",
        )
    if at not in run.commits:
        raise FlorError(
            "no-checkpoint",
            f"{where} has no checkpoint at iteration {at}; {nearest(run.commits, at)}",
        )
    return run


def _check_resumable(store: Store, run: runs.RecordedRun, world_size: int) -> None:
    where = f"run {run.name}/{run.run_id}"
    if run.meta.world_size != world_size:
        raise FlorError(
            "cannot-resume",
            f"{where} ran on {run.meta.world_size} processes ({run.meta.launcher or 'one'}), "
            f"this job has {world_size}: resume it with "
            + (
                f"torchrun --nproc_per_node {run.meta.world_size}"
                if run.meta.launcher == "torchrun"
                else "the same number of processes"
            ),
        )
    if _may_be_recording(store, run):
        raise FlorError(
            "still-recording",
            f"{where} may still be recording (its process {run.meta.pid} on "
            f"{run.meta.host or 'another machine'} beat recently): resume it once it has ended",
        )
    if run.meta.launcher not in (None, "torchrun") or len(run.loops) > 1:
        why = "several flor.it loops" if len(run.loops) > 1 else f"{run.meta.launcher}'s processes"
        raise FlorError("cannot-resume", f"{where} ran {why}: flor resumes one loop")


def _may_be_recording(store: Store, run: runs.RecordedRun) -> bool:
    """Its process is alive (on this machine), or its heartbeat is recent (elsewhere)."""
    if run.meta.status != "running":
        return False
    if run.meta.host == platform.node() and run.meta.pid:
        try:
            os.kill(run.meta.pid, 0)
        except (ProcessLookupError, PermissionError):  # gone (or another user's now)
            return False
    return runs.recording(store, run)  # alive here, and beating (not a reused pid); elsewhere


class Resumer(Session):
    """A recording that goes on with ``recorded``: a ``Replayer`` takes the loop up to the
    last usable checkpoint, a ``Recorder`` (``make_recorder``) the rest."""

    trackers: Ledger

    def __init__(
        self,
        options: Options,
        store: Store,
        reporter: Reporter,
        recorded: runs.RecordedRun,
        make_recorder: MakeRecorder,
        job: Job | None = None,
    ) -> None:
        """``job``: the torchrun job this process is a rank of (its ranks replay in step up
        to the checkpoint every rank committed, then record their journals on)."""
        super().__init__(options, store, reporter)
        replaying = replace(options, mode="replay", run_id=recorded.run_id, resume_from=None)
        self.replayer = Replayer(
            replaying, store, reporter, Streams(keep_stderr=False), job, recorded
        )
        self.recorded = recorded
        try:
            self.at = self._start_point()
        except FlorError:
            self.replayer.release()
            raise
        self.replayer.restore_up_to(self.at)
        if job is None or job.rank == 0:  # said once for the job
            reporter.say(self._starting())
        self._make_recorder = make_recorder
        self.phase: Session = self.replayer
        self.recorder: Recorder | None = None
        self.trackers = self._ledger()

    def _start_point(self) -> int:
        """The iteration to go on after: the last usable checkpoint, of an unchanged training."""
        recorded, changed = self.recorded, sorted(self.replayer.probed)
        if changed:
            raise FlorError(
                "resume-changed",
                f"the script changed block {changed[0]!r} since run {recorded.name}/"
                f"{recorded.run_id}: resuming would mix two trainings in one run; record a "
                "new run instead, or fork it (--from RUN@ITERATION)",
            )
        if not self.replayer.usable:
            raise FlorError(
                "cannot-resume",
                f"run {recorded.name}/{recorded.run_id} has no checkpoint the script can start "
                "from; record a new run instead",
            )
        return max(self.replayer.usable)

    def _starting(self) -> str:
        return (
            f"resuming {self.recorded.name}/{self.recorded.run_id} from its checkpoint at "
            f"iteration {self.at}: iterations up to it are restored, not run; recording from "
            f"{self.at + 1} on"
        )

    def main_loop(self, iterable: Any) -> Iterator[Any]:
        if self.recorder is not None or self.loops:
            raise FlorError("cannot-resume", "a resumed run has one flor.it loop")
        self.loops += 1
        iterator, is_while = as_iterator(iterable)
        self._loop_begins(sys._getframe(1))
        yield from self.replayer.main_loop(iterable if is_while else iterator)
        self.replayer.release()
        self.recorder = self._recorder()
        self.recorder.trackers = self.trackers  # noted in the run from its start
        self.phase = self.recorder
        yield from self.recorder.main_loop(iterable if is_while else iterator, depth=2)

    def _loop_begins(self, frame: Frame) -> None:
        """The script's set-up is done (``frame``: its loop's)."""

    def _restoring(self) -> bool:
        return self.recorder is None and self.replayer.stdout.quiet

    def _ledger(self) -> Ledger:
        """The trackers go on with the recorded run's sinks (an MLflow run continues)."""
        return Ledger.resuming(self.recorded.meta.trackers, self._restoring)

    def _recorder(self) -> Recorder:
        options = replace(self.options, run_id=self.recorded.run_id, resume_from=self.at)
        return self._make_recorder(options, self.replayer.run.meta, None)  # this rank's

    def block_start(self, name: str, probed: bool, frame: Frame | None) -> bool:
        return self.phase.block_start(name, probed, frame or sys._getframe(2))

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame | None
    ) -> tuple[Any, ...]:
        return self.phase.block_end(objs, named, frame or sys._getframe(2))

    def log(self, name: str, value: Any, step: int | None) -> None:
        self.phase.log(name, value, step)

    def note_call(self, name: str) -> None:
        self.phase.note_call(name)

    def where(self) -> str | None:
        return self.phase.where()

    def close(self, exit_status: int | None = None) -> None:
        """The recording's close; before it began, nothing of the run changed."""
        if self.recorder is None:
            self.replayer.release()
            return
        self.recorder.close(exit_status)
        self.upload_failed = self.recorder.upload_failed


class Forker(Resumer):
    """A new run of today's script that goes on from ``recorded``'s checkpoint at iteration
    ``at``: as a resume up to there (the edit may change training: that is the point), then
    today's set-up values that differ from the parent's win over the restored ones
    (``runtime.state.settings``), and a ``Recorder`` records the rest as a run of its own,
    with its parent and fork point."""

    def __init__(
        self,
        options: Options,
        store: Store,
        reporter: Reporter,
        recorded: runs.RecordedRun,
        make_recorder: MakeRecorder,
        at: int,
    ) -> None:
        self.at = at
        self.setup: settings.Settings = {}
        self.wins: settings.Settings | None = None
        self.said: list[str] = []
        super().__init__(options, store, reporter, recorded, make_recorder)

    def _start_point(self) -> int:
        if self.at not in self.replayer.usable:
            raise FlorError(
                "no-checkpoint",
                f"run {self.recorded.name}/{self.recorded.run_id} has no checkpoint at "
                f"iteration {self.at} that this script can start from; "
                f"{nearest(self.replayer.usable, self.at)}",
            )
        return self.at

    def _starting(self) -> str:
        return (
            f"forking {self.recorded.name}/{self.recorded.run_id} at iteration {self.at}: its "
            f"state there is restored, not trained; recording a new run from {self.at + 1} on"
        )

    def _loop_begins(self, frame: Frame) -> None:
        self.setup = settings.of(settings.in_scope(frame))

    def _ledger(self) -> Ledger:
        """A new run: the trackers open new sinks (an MLflow run of its own)."""
        return Ledger.recording(self._restoring)

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame | None
    ) -> tuple[Any, ...]:
        frame = frame or sys._getframe(2)
        if self.phase is not self.replayer or self.replayer.iteration != self.at:
            return self.phase.block_end(objs, named, frame)
        restored = self.replayer.block_end(objs, named, frame)
        scope = settings.in_scope(frame)
        if self.wins is None:  # said once the restored iteration's output is no longer quiet
            self.wins, self.said = settings.fork_settings(
                self.recorded.meta.settings, self.setup, settings.of(scope)
            )
        settings.apply(scope, self.wins)
        return restored

    def _recorder(self) -> Recorder:
        for line in self.said:
            self.reporter.say(f"fork: {line}")
        commit = self.recorded.commits[self.at]
        fork = ForkPoint(self.recorded.run_id, self.at, commit, self.setup, self.wins or {})
        options = replace(self.options, run_id=None, resume_from=self.at)
        return self._make_recorder(options, None, fork)


def nearest(checkpointed: Iterable[int], at: int) -> str:
    """The checkpointed iterations nearest ``at``, said."""
    before = [g for g in checkpointed if g < at]
    after = [g for g in checkpointed if g > at]
    near = ([max(before)] if before else []) + ([min(after)] if after else [])
    if not near:
        return "it has none"
    return "the nearest checkpointed: " + " and ".join(str(g) for g in near)
