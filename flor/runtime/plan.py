"""Which iterations a replay runs, and how.

Each recorded iteration gets one action:

- ``dead``: not run at all; only the loop's iterator advances past it;
- ``quiet``: run with output suppressed, to rebuild state before what is shown;
- ``live``: run and shown: the iterations the user asked for.

A stretch of quiet/live iterations that follows dead ones starts at an
*entry*: a committed iteration whose blocks are skipped and restored. That
rebuilds the state a full run had at the end of the entry iteration, and the
entry's outer body (a scheduler step, an evaluation that updates a tracker)
runs quietly on top of it (ARCHITECTURE.md, semantic 3). Where no checkpoint
precedes a live stretch, replay starts quietly from iteration 0: slower, never
wrong. Inside a stretch, a block is skipped where its iteration is committed
and its code is unchanged, and executed otherwise (semantic 4).

This lives in ``runtime`` rather than ``replay`` because a hand-annotated
script replaying itself (``--replay_flor``) plans in its own process.
"""

from __future__ import annotations

from dataclasses import dataclass

from flor.errors import FlorError

DEAD, QUIET, LIVE = "dead", "quiet", "live"


@dataclass(frozen=True)
class Plan:
    actions: tuple[str, ...]  # one per recorded iteration
    entries: frozenset[int]  # iterations whose blocks must be restored
    natural_end: bool  # run past the last live iteration into the code after the loop

    def action(self, iteration: int) -> str:
        return self.actions[iteration] if iteration < len(self.actions) else DEAD

    @property
    def last_live(self) -> int:
        lives = [i for i, a in enumerate(self.actions) if a == LIVE]
        return lives[-1] if lives else -1


def segment_bounds(total: int, n: int, committed: set[int]) -> list[tuple[int, int]]:
    """Split ``range(total)`` into ``n`` contiguous ranges, starting each on a checkpoint.

    A segment can start cheaply at ``k + 1`` when iteration ``k`` is committed;
    each ideal (even) boundary moves to the nearest such start when one lies
    within half a segment, and stays put otherwise.
    """
    starts = sorted({0} | {k + 1 for k in committed if k + 1 < total})
    bounds = [0]
    for i in range(1, n):
        ideal = round(i * total / n)
        lo = bounds[-1]
        near = [s for s in starts if lo < s < total and abs(s - ideal) <= total / (2 * n)]
        bounds.append(min(near, key=lambda s: (abs(s - ideal), s)) if near else max(ideal, lo))
    bounds.append(total)
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


def parse_iterations(spec: str, total: int) -> set[int]:
    """``"9"``, ``"0-4,10"`` -> a set of 0-based iteration indices within the record."""
    chosen: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        lo_text, _, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if hi_text else lo
        except ValueError:
            raise FlorError(
                "bad-iterations", f"iterations {spec!r}: use e.g. 9 or 0-4,10"
            ) from None
        if not 0 <= lo <= hi < total:
            raise FlorError(
                "bad-iterations", f"iterations {part!r} outside the record's 0-{total - 1}"
            )
        chosen.update(range(lo, hi + 1))
    return chosen


def make_plan(total: int, committed: set[int], live: set[int], complete: bool) -> Plan:
    """Plan a replay of the iterations in ``live`` out of ``total`` recorded ones."""
    actions = [DEAD] * total
    entries: set[int] = set()
    resume = 0  # first iteration whose start state is known without an entry
    for start, stop in _stretches(live):
        restore_points = [k for k in committed if resume <= k < start]
        if start > resume and restore_points:
            entry = max(restore_points)
            entries.add(entry)
            first_quiet = entry
        else:
            first_quiet = resume
        for i in range(first_quiet, start):
            actions[i] = QUIET
        for i in range(start, stop):
            actions[i] = LIVE
        resume = stop
    natural_end = complete and bool(live) and max(live) == total - 1
    return Plan(tuple(actions), frozenset(entries), natural_end)


def _stretches(live: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in sorted(live):
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out
