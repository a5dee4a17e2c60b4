"""Adaptive checkpointing: keep checkpoint cost under ``epsilon`` of compute.

Cost is everything a checkpoint takes from training: the training thread's
in-memory copy (the stall) plus the writer's CPU time to serialize and hash it
(on a machine whose cores torch already uses, background CPU is not free).
A checkpoint is taken when the cost spent so far plus the expected cost of
this one stays within ``epsilon`` times the compute so far. Expensive
checkpoints thereby become sparse and periodic on their own; the first one is
always taken, because cost must be measured before it can be budgeted, and
the estimate is a running mean over the recent checkpoints, not only the first.
"""

from __future__ import annotations

import threading
from collections import deque


class CheckpointPolicy:
    def __init__(self, epsilon: float) -> None:
        self.epsilon = epsilon
        self.spent = 0.0  # seconds of checkpoint cost so far
        self.taken = 0
        self._recent: deque[float] = deque(maxlen=8)  # cost of each recent checkpoint
        self._pending: dict[int, float] = {}  # iteration -> cost charged so far
        self._lock = threading.Lock()  # the writer thread charges too

    def should_checkpoint(self, compute: float) -> bool:
        """Whether to checkpoint now, after ``compute`` seconds of training."""
        with self._lock:
            if not self._recent and not self._pending:
                return True
            recent = list(self._recent) or list(self._pending.values())
            expected = sum(recent) / len(recent)
            return self.spent + expected <= self.epsilon * compute

    def charge(self, iteration: int, seconds: float) -> None:
        """Account ``seconds`` of cost to the checkpoint of ``iteration``."""
        with self._lock:
            self.spent += seconds
            self._pending[iteration] = self._pending.get(iteration, 0.0) + seconds

    def settle(self, iteration: int) -> None:
        """The checkpoint of ``iteration`` is fully paid: learn from its cost."""
        with self._lock:
            if iteration in self._pending:
                self._recent.append(self._pending.pop(iteration))
                self.taken += 1

    def overhead(self, compute: float) -> float:
        """Achieved overhead: checkpoint cost over compute."""
        return self.spent / compute if compute > 0 else 0.0
