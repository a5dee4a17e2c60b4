"""The background writer: serializes and stores checkpoints off the training thread.

The training thread hands over snapshots it already copied in memory (and, when
small, serialized), so it never waits on disk. What is in flight is bounded by
``max_bytes``: the recorder asks ``room_for`` before a checkpoint and skips one
that would not fit, rather than stall training; ``submit`` waits only for a
first checkpoint of unknown size. One thread, one FIFO queue: data jobs of an
iteration run before the journal job that commits them (a commit comes after its
data). A job
that fails marks its iteration failed; the commit is then dropped with a
warning, training continues, and replay re-executes that iteration. A store
out of space (ENOSPC, a quota) is said once: ``full`` is then set, the
recorder takes no more checkpoints, and ``on_full`` frees the store's reserve
so that the journal's last small entries still land.
``submit`` returns a future of the job's result: a commit job reads the
manifests its data jobs returned, instead of a dict they fill.
"""

from __future__ import annotations

import errno
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

DEFAULT_MAX_BYTES = 1 << 30
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})  # not EFBIG: one file too large

Job = Callable[[], Any]


class BackgroundWriter:
    def __init__(
        self,
        on_cost: Callable[[int, float], None],
        warn: Callable[[str], None],
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_full: Callable[[], None] = lambda: None,
    ) -> None:
        self._on_cost = on_cost
        self._on_full = on_full
        self.full = False  # the store ran out of space: no more checkpoints
        self.committed = -1  # the last iteration whose checkpoints were committed
        self._warn_user = warn
        self._max_bytes = max_bytes
        self._inflight = 0
        self._queued = 0  # jobs handed to the thread and not yet done
        self.idle = True  # none queued: every job queued so far has run (read every iteration)
        self._cond = threading.Condition()
        self._queue: queue.Queue[tuple[int, int, Job, bool, Future[Any]] | None] = queue.Queue()
        self._failed: set[int] = set()
        self.warnings: list[str] = []
        self._thread = threading.Thread(target=self._work, name="flor-writer", daemon=True)
        self._thread.start()

    def submit(
        self, iteration: int, job: Job, nbytes: int = 0, commit: bool = False
    ) -> Future[Any]:
        """Queue ``job`` for ``iteration``, waiting while too many bytes are in flight."""
        future: Future[Any] = Future()
        with self._cond:
            while self._inflight and self._inflight + nbytes > self._max_bytes:
                self._cond.wait()
            self._inflight += nbytes
            self._queued += 1
            self.idle = False
        self._queue.put((iteration, nbytes, job, commit, future))
        return future

    def room_for(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more in flight stay within ``max_bytes`` (or nothing is)."""
        return not self._inflight or self._inflight + nbytes <= self._max_bytes

    def flush(self) -> None:
        """Block until every queued job has run."""
        self._queue.join()

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
        self._thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.task_done()
                return
            iteration, nbytes, job, commit, future = item
            try:
                self._run(iteration, job, commit, future)
            finally:
                with self._cond:
                    self._inflight -= nbytes
                    self._queued -= 1
                    self.idle = self._queued == 0
                    self._cond.notify_all()
                self._queue.task_done()

    def _run(
        self,
        iteration: int,
        job: Job,
        commit: bool,
        future: Future[Any],
        clock: Callable[[], float] = time.thread_time,  # what the job cost: CPU, off the loop
    ) -> None:
        began = clock()
        if self.full and iteration >= 0:  # queued before the store filled: keep the reserve
            self._failed.add(iteration)
        try:
            if commit and iteration in self._failed:
                if not self.full:  # a full store said so once, for all of them
                    self._warn(
                        f"checkpoint of iteration {iteration} not committed; replay re-executes it"
                    )
                future.cancel()
            elif iteration not in self._failed:
                future.set_result(job())
                if commit:
                    self.committed = iteration
            else:
                future.cancel()
        except Exception as e:  # disk full, permissions: training must go on
            if isinstance(e, OSError) and e.errno in _NO_SPACE:
                self._out_of_space(iteration, e)
            elif iteration >= 0:
                self._failed.add(iteration)
                self._warn(f"checkpoint of iteration {iteration} skipped: {e}")
            else:  # the journal's own entry (no checkpoint): the next ones still run
                self._warn(f"journal entry not written: {e}")
            future.set_exception(e)
        finally:
            self._on_cost(iteration, clock() - began)  # -1: the journal's own

    def _out_of_space(self, iteration: int, e: OSError) -> None:
        if iteration >= 0:
            self._failed.add(iteration)
        if self.full:
            return
        self.full = True
        self._on_full()
        kept = (
            f"iterations up to {self.committed} replay from checkpoints"
            if self.committed >= 0
            else "no checkpoint was committed"
        )
        self._warn(
            f"the store is out of space ({e.strerror or e}) at iteration {iteration}: no more "
            f"checkpoints; {kept}, later ones re-execute"
        )

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self._warn_user(message)
