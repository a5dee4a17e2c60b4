"""Thinning: which checkpoints a run keeps when they outgrow its storage budget.

The time budget decides when a checkpoint is taken; this decides how long it
is kept. While the bytes the run's checkpoints keep in the store exceed the
budget, the least useful one goes, never the newest (replaying a line after
the loop needs it). Least useful means, in this order:

1. not *preferred*: taken on a round count rather than on the eve of one of the
   loop's own periodic iterations, where hindsight lines are most often added;
2. the smallest round divisor of g + 1 (1, 2, 5, 10, 20, ...): what remains are
   the multiples of ever larger round numbers, evenly spaced, where a new
   ``if step % N == 0`` line will find a checkpoint right before it;
3. the oldest, so recent iterations stay dense.

A checkpoint's bytes are its manifests plus the tensor blobs that this run put
in the store and that no kept checkpoint still refers to. A blob the store
held before the run (another run's frozen backbone) is never deleted here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from flor.inputs import StorageBudget
from flor.runtime.checkpoints.policy import round_numbers


@dataclass(frozen=True)
class Piece:
    """One block's checkpoint: its manifest, the blobs it refers to, those it created."""

    key: str
    nbytes: int
    blobs: dict[str, int]  # sha256 -> bytes
    created: frozenset[str]


@dataclass(frozen=True)
class Dropped:
    """What thinning one iteration frees: its manifests, and the blobs nobody kept refers to."""

    iteration: int
    keys: tuple[str, ...]
    blobs: tuple[str, ...]
    nbytes: int


@dataclass(frozen=True)
class _Kept:
    iteration: int
    pieces: tuple[Piece, ...]
    preferred: bool

    @property
    def rank(self) -> tuple[bool, int, int]:
        """Lowest goes first."""
        return (self.preferred, round_divisor(self.iteration + 1), self.iteration)


class Thinning:
    def __init__(self, budget: StorageBudget) -> None:
        self.budget = budget
        self.stored = 0  # bytes the kept checkpoints hold in the store
        self.thinned = 0
        self._kept: dict[int, _Kept] = {}
        self._refs: Counter[str] = Counter()  # blob -> kept pieces that refer to it
        self._owned: dict[str, int] = {}  # blobs this run created that are still referred to

    @property
    def kept(self) -> list[int]:
        return sorted(self._kept)

    def add(self, iteration: int, pieces: Iterable[Piece], preferred: bool = False) -> None:
        """Iteration ``iteration``'s checkpoint is committed."""
        kept = _Kept(iteration, tuple(pieces), preferred)
        self._kept[iteration] = kept
        for piece in kept.pieces:
            self.stored += piece.nbytes
            for sha, size in piece.blobs.items():
                self._refs[sha] += 1
                if sha in piece.created and sha not in self._owned:
                    self._owned[sha] = size
                    self.stored += size

    def excess(self, compute: float) -> list[Dropped]:
        """Drop checkpoints until the rest fit the budget after ``compute`` seconds of
        training; what each drop frees, for the caller to delete."""
        limit = self.budget.limit(compute)
        dropped: list[Dropped] = []
        while limit is not None and self.stored > limit and len(self._kept) > 1:
            newest = max(self._kept)
            victim = min((k for g, k in self._kept.items() if g != newest), key=lambda k: k.rank)
            dropped.append(self._drop(victim))
        return dropped

    def follow(self, iterations: Iterable[int]) -> list[Dropped]:
        """Drop what another rank's thinning dropped (a job thins as its rank 0 does)."""
        return [self._drop(self._kept[g]) for g in sorted(iterations) if g in self._kept]

    def _drop(self, kept: _Kept) -> Dropped:
        del self._kept[kept.iteration]
        self.thinned += 1
        freed, orphans = 0, []
        for piece in kept.pieces:
            freed += piece.nbytes
            for sha in piece.blobs:
                self._refs[sha] -= 1
                if self._refs[sha] == 0:
                    del self._refs[sha]
                    if sha in self._owned:
                        freed += self._owned.pop(sha)
                        orphans.append(sha)
        self.stored -= freed
        keys = tuple(p.key for p in kept.pieces)
        return Dropped(kept.iteration, keys, tuple(sorted(orphans)), freed)


def round_divisor(n: int) -> int:
    """The largest round number (1, 2, 5, 10, 20, ...) that divides ``n`` (``n`` >= 1)."""
    return max(r for r in round_numbers(n) if n % r == 0)
