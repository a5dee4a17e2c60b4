"""The background writer: serializes and stores checkpoints off the training thread.

The training thread hands over snapshots it already copied in memory, so it
never waits on disk; it waits only when more than ``max_bytes`` are still in
flight, which bounds memory. One thread, one FIFO queue: data jobs of an
iteration run before the journal job that commits them (semantic 8). A job
that fails (disk full) marks its iteration failed; the commit is then dropped
with a warning, training continues, and replay re-executes that iteration.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

DEFAULT_MAX_BYTES = 1 << 30

Job = Callable[[], Any]


class BackgroundWriter:
    def __init__(self, on_cost: Callable[[int, float], None], max_bytes: int = DEFAULT_MAX_BYTES):
        self._on_cost = on_cost
        self._max_bytes = max_bytes
        self._inflight = 0
        self._cond = threading.Condition()
        self._queue: queue.Queue[tuple[int, int, Job, bool] | None] = queue.Queue()
        self._failed: set[int] = set()
        self.warnings: list[str] = []
        self._thread = threading.Thread(target=self._work, name="flor-writer", daemon=True)
        self._thread.start()

    def submit(self, iteration: int, job: Job, nbytes: int = 0, commit: bool = False) -> float:
        """Queue ``job`` for ``iteration``; return seconds spent waiting for room."""
        start = time.perf_counter()
        with self._cond:
            while self._inflight and self._inflight + nbytes > self._max_bytes:
                self._cond.wait()
            self._inflight += nbytes
        self._queue.put((iteration, nbytes, job, commit))
        return time.perf_counter() - start

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
            iteration, nbytes, job, commit = item
            cpu = time.thread_time()
            try:
                if commit and iteration in self._failed:
                    self._warn(
                        f"checkpoint of iteration {iteration} not committed; replay re-executes it"
                    )
                elif iteration not in self._failed:
                    job()
            except Exception as e:  # disk full, permissions: training must go on
                self._failed.add(iteration)
                self._warn(f"checkpoint of iteration {iteration} skipped: {e}")
            finally:
                if iteration >= 0:
                    self._on_cost(iteration, time.thread_time() - cpu)
                with self._cond:
                    self._inflight -= nbytes
                    self._cond.notify_all()
                self._queue.task_done()

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        sys.stderr.write(f"flor: warning: {message}\n")
        sys.stderr.flush()
