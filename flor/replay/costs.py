"""Whether restoring a block pays, where running it would do as well.

Inside a stretch of iterations that a replay runs, the state a block starts from
is the one a full run had, so a checkpointed block may run or be restored: the
output is the same. Restoring pays where the block takes longer than the restore
(millisecond steps of a small model or an environment: it does not). A restore
costs the training thread about what taking the checkpoint did (copying the state,
and rebinding it), its decoding prefetched in the background: the recording's
mean copy is the first estimate, and the replay's own restores refine it.
An iteration where the replay must start (an entry) is restored regardless.
"""

from __future__ import annotations

from flor.runs.records import RunMeta


class RestoreCost:
    def __init__(self, meta: RunMeta, always: bool) -> None:
        """``always``: restore wherever a checkpoint is (``--restore always``)."""
        stalls = meta.stall_seconds
        self.always = always or not stalls  # unknown cost (a run killed early): restore
        self.mean = sum(stalls) / len(stalls) if stalls else 0.0
        self._measured = 0

    def pays(self, block_seconds: float | None) -> bool:
        """Whether restoring beats running a block that took ``block_seconds`` recorded."""
        return self.always or block_seconds is None or block_seconds > self.mean

    def measured(self, seconds: float) -> None:
        """A restore took ``seconds`` of the training thread: the estimate follows it."""
        self._measured += 1
        self.mean += (seconds - self.mean) / self._measured
