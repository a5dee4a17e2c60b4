"""A recording's time bookkeeping: training seconds per iteration, per block, and flor's own.

``compute`` is training time inside ``flor.it`` iterations, flor's own time
(the ``stall`` of checkpoint copies) left out: the policy's budget is a
fraction of it. Timings go into the journal with the next entry written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from flor.runs.series import Timings

_IMPORTED = time.monotonic()  # when flor was imported: the fallback start of the process


def process_age() -> float:
    """Seconds since this process started: from the kernel where Linux says (the start-up
    before ``import flor`` counts too), else since flor was imported."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: ticks after boot
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - _IMPORTED


class IterationClock:
    def __init__(self) -> None:
        # The recorder's fast lane does ``turn``'s arithmetic on these three inline.
        self.compute = 0.0
        self.timings: dict[int, float] = {}  # not yet journaled
        self._block_seconds: dict[int, float] = {}
        self.iteration_start = 0.0
        self._block_start = 0.0
        self._stall = 0.0  # flor's own time inside the open iteration

    # Each call takes the time its caller read (``now``), who reads it once for its own
    # bookkeeping too: a clock read is a noticeable part of a sub-millisecond step.
    def turn(self, ended: int | None, now: float, start: float) -> None:
        """Iteration ``ended`` (None: none, or ended already) ended at ``now``, and the next
        begins at ``start``: one call where most iterations would make two."""
        if ended is not None:
            elapsed = now - self.iteration_start - self._stall
            self.compute += elapsed
            self.timings[ended] = elapsed
        self._stall = 0.0
        self.iteration_start = start

    def end_iteration(self, iteration: int, now: float) -> None:
        elapsed = now - self.iteration_start - self._stall
        self.compute += elapsed
        self.timings[iteration] = elapsed

    def begin_block(self, now: float) -> None:
        self._block_start = now

    def end_block(self, iteration: int, now: float) -> float:
        """Close the block's time; return the compute so far, this iteration's included."""
        seconds = self._block_seconds.get(iteration, 0.0) + now - self._block_start
        self._block_seconds[iteration] = seconds
        return self.compute + (now - self.iteration_start - self._stall)

    def stalled(self, seconds: float) -> None:
        """``seconds`` of flor's own work inside the iteration: not training."""
        self._stall += seconds

    def take(self) -> tuple[Mapping[int, float], Mapping[int, float]]:
        """Seconds per iteration, and in its blocks, since the last journal entry (as
        ``series.Timings`` where consecutive: one list, not a dict, to journal)."""
        timings, self.timings = self.timings, {}
        blocks, self._block_seconds = self._block_seconds, {}
        return Timings.of(timings), Timings.of(blocks)
