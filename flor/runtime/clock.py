"""A recording's time bookkeeping: training seconds per iteration, per block, and flor's own.

``compute`` is training time inside ``flor.it`` iterations, flor's own time
(the ``stall`` of checkpoint copies) left out: the policy's budget is a
fraction of it. Timings go into the journal with the next entry written.
"""

from __future__ import annotations

import time


class IterationClock:
    def __init__(self) -> None:
        self.compute = 0.0
        self._timings: dict[int, float] = {}  # not yet journaled
        self._block_seconds: dict[int, float] = {}
        self._iteration_start = 0.0
        self._block_start = 0.0
        self._stall = 0.0  # flor's own time inside the open iteration

    def begin_iteration(self) -> None:
        self._stall = 0.0
        self._iteration_start = time.perf_counter()

    def end_iteration(self, iteration: int) -> None:
        elapsed = time.perf_counter() - self._iteration_start - self._stall
        self.compute += elapsed
        self._timings[iteration] = elapsed

    def begin_block(self) -> None:
        self._block_start = time.perf_counter()

    def end_block(self, iteration: int) -> float:
        """Close the block's time; return the compute so far, this iteration's included."""
        now = time.perf_counter()
        seconds = self._block_seconds.get(iteration, 0.0) + now - self._block_start
        self._block_seconds[iteration] = seconds
        return self.compute + (now - self._iteration_start - self._stall)

    def stalled(self, seconds: float) -> None:
        """``seconds`` of flor's own work inside the iteration: not training."""
        self._stall += seconds

    def take(self) -> tuple[dict[int, float], dict[int, float]]:
        """Seconds per iteration, and in its blocks, since the last journal entry."""
        timings, self._timings = self._timings, {}
        blocks, self._block_seconds = self._block_seconds, {}
        return _rounded(timings), _rounded(blocks)


def _rounded(seconds: dict[int, float]) -> dict[int, float]:
    return {k: round(v, 6) for k, v in seconds.items()}
