"""What the writer's background work costs training: measured, not assumed.

The writer hashes and writes beside the training thread. On a spare core that costs
training nothing but the moments it waits for the GIL or for a core; on a machine whose
cores torch already uses, every second of the writer's CPU is a second taken from it.

``spare_core()`` says which machine this is. With a spare core, the recorder charges
the writer's work by what the training thread lost while it ran: the time the thread
was off its CPU (waiting for the GIL, descheduled) beyond its usual share of off-CPU
time, measured between the writer's idle moments (``Interference``). Without one, torch's
waiting threads spin on their CPU and hide the loss, so the writer's CPU time is charged
in full.
"""

from __future__ import annotations

import os
import time


def spare_core(torch_threads: int) -> bool:
    """Whether a core is left beside torch's ``torch_threads`` (the training thread among
    them) for the writer."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores > torch_threads


class Interference:
    """The training thread's off-CPU time while the writer works, beyond its usual rate.

    Both ends are read on the training thread: ``begin`` when it hands the writer work
    (the writer idle until then), ``end`` once it finds the writer idle again. The usual
    rate is the one between the previous ``end`` and this ``begin``: a loop that waits on
    its data or environment is off its CPU by itself, and that is not the writer's doing.
    """

    def __init__(self) -> None:
        self._idle_since = self._read()  # wall and CPU time when the writer went idle
        self._busy_since: tuple[float, float] | None = None
        self._usual = 0.0  # off-CPU seconds per second, while the writer was idle
        self.watching = False  # between begin and end

    def begin(self) -> None:
        """The writer got work: the idle stretch before it sets the usual rate."""
        if self._busy_since is not None:
            return
        now = self._read()
        wall = now[0] - self._idle_since[0]
        if wall > 0:
            self._usual = max(wall - (now[1] - self._idle_since[1]), 0.0) / wall
        self._busy_since = now
        self.watching = True

    def end(self) -> float:
        """The writer is idle again: the seconds its work cost the training thread."""
        if self._busy_since is None:
            return 0.0
        now = self._read()
        wall = now[0] - self._busy_since[0]
        off_cpu = wall - (now[1] - self._busy_since[1])
        self._busy_since, self._idle_since = None, now
        self.watching = False
        return max(off_cpu - self._usual * wall, 0.0)

    @staticmethod
    def _read() -> tuple[float, float]:
        return time.perf_counter(), time.thread_time()
