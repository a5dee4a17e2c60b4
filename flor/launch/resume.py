"""``flor run --resume``: go on with a run that did not finish, from its last checkpoint.

A run killed (preempted, out of time, out of memory) or crashed holds the whole training
state at its checkpoints. Resuming runs the script again: the iterations up to the last
usable checkpoint K are replayed (those before K not run at all, K restored without output:
a replay segment's start), and from K + 1 on a recording goes on into the same run, its
journal continued. With the script unchanged, what follows is what the uninterrupted run
would have done. An edit that changes training (a block's code) is refused: resuming would
mix two trainings in one run.

``unfinished`` finds the run a requeued job's command means: the newest run of the name,
script and arguments, if it did not finish.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from flor import runs
from flor.errors import FlorError
from flor.replay.session import Replayer
from flor.runs.records import RunMeta
from flor.runtime.journal.stdout_capture import Streams
from flor.runtime.loop.recorder import Recorder
from flor.runtime.loop.session import Session, as_iterator
from flor.runtime.process.job import Job
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.runtime.state.scope import Frame
from flor.store import Store


def unfinished(
    store: Store, options: Options, say: Callable[[str], None], environ: Mapping[str, str]
) -> runs.RecordedRun | None:
    """The newest run of ``options``' name, script and arguments if it did not finish and
    has a checkpoint to go on from (None, said, where not: a new run is recorded); a
    one-line error if it may still be recording, or cannot be resumed, or this process is a
    rank of a torchrun job (``environ``)."""
    if Job.from_env(environ) is not None:
        raise FlorError("cannot-resume", "--resume resumes a run of one process (not torchrun's)")
    script, argv = options.script, tuple(options.argv or ())[1:]
    for run_id in reversed(runs.list_runs(store, options.name)):
        head = runs.load_head(store, options.name, run_id)
        if head.meta.script != script or tuple(head.meta.argv[1:]) != argv:
            continue
        if head.meta.status == "finished":
            break
        run = runs.load_run(store, options.name, run_id)
        _check_resumable(store, run)
        if any(c.blocks for c in run.commits.values()):
            return run
        say(f"run {run.name}/{run.run_id} has no checkpoint to go on from: recording a new run")
        return None
    say(f"no unfinished run of {options.name} with this script and arguments: recording a new one")
    return None


def _check_resumable(store: Store, run: runs.RecordedRun) -> None:
    where = f"run {run.name}/{run.run_id}"
    if _may_be_recording(store, run):
        raise FlorError(
            "still-recording",
            f"{where} may still be recording (its process {run.meta.pid} on "
            f"{run.meta.host or 'another machine'} beat recently): resume it once it has ended",
        )
    if run.meta.world_size > 1 or len(run.loops) > 1:
        why = "several processes" if run.meta.world_size > 1 else "several flor.it loops"
        raise FlorError("cannot-resume", f"{where} ran {why}: flor resumes one loop of one process")


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

    def __init__(
        self,
        options: Options,
        store: Store,
        reporter: Reporter,
        recorded: runs.RecordedRun,
        make_recorder: Callable[[Options, RunMeta], Recorder],
    ) -> None:
        super().__init__(options, store, reporter)
        replaying = replace(options, mode="replay", run_id=recorded.run_id, resume_from=None)
        self.replayer = Replayer(
            replaying, store, reporter, Streams(keep_stderr=False), None, recorded
        )
        changed = sorted(self.replayer.probed)
        if changed:
            self.replayer.release()
            raise FlorError(
                "resume-changed",
                f"the script changed block {changed[0]!r} since run {recorded.name}/"
                f"{recorded.run_id}: resuming would mix two trainings in one run; record a "
                "new run instead",
            )
        if not self.replayer.usable:
            self.replayer.release()
            raise FlorError(
                "cannot-resume",
                f"run {recorded.name}/{recorded.run_id} has no checkpoint the script can start "
                "from; record a new run instead",
            )
        self.at = max(self.replayer.usable)
        self.replayer.restore_up_to(self.at)
        reporter.say(
            f"resuming {recorded.name}/{recorded.run_id} from its checkpoint at iteration "
            f"{self.at}: iterations up to it are restored, not run; recording from "
            f"{self.at + 1} on"
        )
        self.recorded = recorded
        self._make_recorder = make_recorder
        self.phase: Session = self.replayer
        self.recorder: Recorder | None = None

    def main_loop(self, iterable: Any) -> Iterator[Any]:
        if self.recorder is not None or self.loops:
            raise FlorError("cannot-resume", "a resumed run has one flor.it loop")
        self.loops += 1
        iterator, is_while = as_iterator(iterable)
        yield from self.replayer.main_loop(iterable if is_while else iterator)
        self.replayer.release()
        options = replace(self.options, run_id=self.recorded.run_id, resume_from=self.at)
        self.recorder = self._make_recorder(options, self.recorded.meta)
        self.phase = self.recorder
        yield from self.recorder.main_loop(iterable if is_while else iterator, depth=2)

    def block_start(self, name: str, probed: bool, frame: Frame) -> bool:
        return self.phase.block_start(name, probed, frame)

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame
    ) -> tuple[Any, ...]:
        return self.phase.block_end(objs, named, frame)

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
