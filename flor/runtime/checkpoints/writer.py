"""The background writer: serializes and stores checkpoints off the training thread.

The training thread hands over snapshots it already copied in memory, so it
never waits on disk; it waits only when more than ``max_bytes`` are still in
flight, which bounds memory. A checkpoint's data of at most ``inline_bytes``
is written on the training thread instead, where nothing is queued before it
(``run_inline`` says why): charged the wall time it took there, which
``inline_seconds`` tells the caller. One thread, one FIFO queue: data jobs of an
iteration run before the journal job that commits them (semantic 8). A job
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
INLINE_BYTES = 16 << 20  # a recording's checkpoints this small are written inline (run_inline)
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})  # not EFBIG: one file too large

Job = Callable[[], Any]


class BackgroundWriter:
    def __init__(
        self,
        on_cost: Callable[[int, float], None],
        warn: Callable[[str], None],
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_full: Callable[[], None] = lambda: None,
        inline_bytes: int | None = None,
    ) -> None:
        self._on_cost = on_cost
        self._on_full = on_full
        self.full = False  # the store ran out of space: no more checkpoints
        self.committed = -1  # the last iteration whose checkpoints were committed
        self._warn_user = warn
        self._max_bytes = max_bytes
        self._inline_bytes = inline_bytes  # jobs this small run on the caller's thread
        self.inline_seconds = 0.0  # the caller's wall time spent running jobs inline
        self._inflight = 0
        self._queued = 0  # jobs handed to the thread and not yet done
        self._cond = threading.Condition()
        self._queue: queue.Queue[tuple[int, int, Job, bool, Future[Any]] | None] = queue.Queue()
        self._failed: set[int] = set()
        self.warnings: list[str] = []
        self._thread = threading.Thread(target=self._work, name="flor-writer", daemon=True)
        self._thread.start()

    def submit(
        self, iteration: int, job: Job, nbytes: int = 0, commit: bool = False
    ) -> Future[Any]:
        """Queue ``job`` for ``iteration`` (waiting while too many bytes are in flight), or
        run it now: a checkpoint's data, small, with nothing queued before it (``run_inline``)."""
        future: Future[Any] = Future()
        with self._cond:
            inline = self._queued == 0 and iteration >= 0 and not commit and self.run_inline(nbytes)
            while not inline and self._inflight and self._inflight + nbytes > self._max_bytes:
                self._cond.wait()
            if not inline:
                self._inflight += nbytes
                self._queued += 1
        if inline:
            start = time.perf_counter()
            self._run(iteration, job, commit, future, time.perf_counter)
            self.inline_seconds += time.perf_counter() - start
        else:
            self._queue.put((iteration, nbytes, job, commit, future))
        return future

    def run_inline(self, nbytes: int) -> bool:
        """Whether a checkpoint's data job of ``nbytes`` runs on the caller's thread, charged
        the wall time it takes there. A thread of its own takes turns at the GIL with a
        training loop of short torch calls: each call the loop makes lets the writer in,
        and the loop then waits for the writer's next release. A DQN checkpoint of 1.5 MB
        written in the background cost its loop about 1,000 such handoffs (10-20 ms
        here), more than writing it inline (4-7 ms); a large one is mostly hashing and
        writing, which release the GIL, and is better off the training thread. Commits
        stay in the background: they wait on the disk (fsync), which releases the GIL."""
        return self._inline_bytes is not None and nbytes <= self._inline_bytes

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
