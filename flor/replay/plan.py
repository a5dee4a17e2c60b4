"""Which iterations a replay runs, and how.

Each recorded iteration gets one action:

- ``dead``: not run at all; only the loop's iterator advances past it;
- ``quiet``: run with output suppressed, to rebuild state before what is shown;
- ``live``: run and shown: the iterations the user asked for;
- ``echo``: shown but not run: it prints what the record says it printed
  (a sparse replay, where the edit's statements do not run in it);
- ``rebuild``: an entry (below) that is shown: run quietly, its recorded output printed.

A stretch of quiet/live iterations that follows dead ones starts at an
*entry*: a committed iteration whose blocks are skipped and restored. That
rebuilds the state a full run had at the end of the entry iteration, and the
entry's outer body (a scheduler step, an evaluation that updates a tracker)
runs quietly on top of it. Where no checkpoint
precedes a live stretch, replay starts quietly from iteration 0: slower, never
wrong. Inside a stretch, a block is skipped where its iteration is committed
and its code is unchanged, and executed otherwise (``replay.decide``).

Only *usable* checkpoints count as committed: those holding every value the
edited script's ``SkipBlock.end`` calls take (an edit may read a value, such as
a large last batch, that a checkpoint left out). The others are planned around,
as if absent, so replay re-executes there instead of failing.

``plan_replay`` decides a segment's plan before anything runs (the edit's changed blocks,
usable checkpoints, segment bounds, sparse or dense iterations, iterations to verify);
``replan`` plans its iterations again once the loop's conditions can be read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from flor import runs
from flor.errors import FlorError
from flor.replay.triggers import Needed, needed_iterations
from flor.runtime.journal.conditions import Lookup, no_lookup
from flor.runtime.process.options import Options
from flor.sources import project_sources
from flor.transform import BlockChanges, EndCall, Seen, compare
from flor.transform.hindsight import Hindsight, analyze_project

if TYPE_CHECKING:
    from flor.runs import RecordedRun
    from flor.runs.records import CheckpointEntry, Commit

DEAD, QUIET, LIVE, ECHO, REBUILD = "dead", "quiet", "live", "echo", "rebuild"


@dataclass(frozen=True)
class Plan:
    actions: tuple[str, ...]  # one per recorded iteration
    entries: frozenset[int]  # iterations whose blocks must be restored
    natural_end: bool  # run past the last live iteration into the code after the loop

    def action(self, iteration: int) -> str:
        return self.actions[iteration] if iteration < len(self.actions) else DEAD

    @functools.cached_property
    def last_live(self) -> int:
        """The last iteration run or shown (-1: none); read every iteration, so computed once."""
        lives = [i for i, a in enumerate(self.actions) if a != DEAD]
        return lives[-1] if lives else -1


def segment_bounds(
    total: int, n: int, committed: set[int], first: int = 0
) -> list[tuple[int, int]]:
    """Split ``range(first, total)`` into ``n`` contiguous ranges, starting each on a
    checkpoint.

    A segment can start cheaply at ``k + 1`` when iteration ``k`` is committed;
    each ideal (even) boundary moves to the nearest such start when one lies
    within half a segment, and stays put otherwise.
    """
    span = total - first
    starts = sorted({first} | {k + 1 for k in committed if first < k + 1 < total})
    bounds = [first]
    for i in range(1, n):
        ideal = first + round(i * span / n)
        lo = bounds[-1]
        near = [s for s in starts if lo < s < total and abs(s - ideal) <= span / (2 * n)]
        bounds.append(min(near, key=lambda s: (abs(s - ideal), s)) if near else max(ideal, lo))
    bounds.append(total)
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


def own_iterations(run: RecordedRun) -> int:
    """The first iteration ``run`` trained itself: a fork's start (the iterations before are
    its parent's), else 0."""
    return 0 if run.meta.forked_at is None else run.meta.forked_at + 1


def check_segments(run: RecordedRun, count: int) -> None:
    """Segments split iterations: a run that never entered a flor.it loop has none."""
    if count > 1 and not run.loops and not run.commits:
        raise FlorError(
            "no-loop",
            f"run {run.name}/{run.run_id} has no flor.it loop, so no iterations to split into "
            "segments; replay it whole (without --segment or --workers)",
        )


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


def sparse_plan(
    total: int, committed: set[int], needed: set[int], shown: set[int], complete: bool
) -> Plan:
    """Show ``shown``, running only the ``needed`` ones (and what rebuilds their state); the
    rest print their recorded output. ``committed`` must hold the recorded output of any
    entry inside ``shown`` (it is echoed, since its outer body runs from stale state)."""
    live = needed & shown
    if complete and total - 1 in shown:
        live.add(total - 1)  # the code after the loop runs from the loop's real end state
    base = make_plan(total, committed, live, complete)
    actions = list(base.actions)
    for g in shown:
        if actions[g] == DEAD:
            actions[g] = ECHO
        elif actions[g] == QUIET:  # on the way to a live one, from the right state
            actions[g] = REBUILD if g in base.entries else LIVE
    return Plan(tuple(actions), base.entries, base.natural_end)


def _stretches(live: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for i in sorted(live):
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def sample_checks(candidates: list[int], k: int) -> frozenset[int]:
    """``k`` of the checkpointed iterations, spread evenly, to re-execute and compare."""
    if k <= 0 or not candidates:
        return frozenset()
    k = min(k, len(candidates))
    return frozenset(candidates[(2 * i + 1) * len(candidates) // (2 * k)] for i in range(k))


def _lacks(entry: CheckpointEntry, end: EndCall | None, recorded: EndCall | None) -> str | None:
    """What the edited ``end`` call needs that a block's checkpoint does not hold, or None."""
    if end is None:
        return None
    objs = entry.objs
    if objs is None:  # an older record: the recorded script's call says
        objs = len(recorded.positional) if recorded else 0
    if len(end.positional) != objs:
        return f"{len(end.positional)} positional values where the record has {objs}"
    held = entry.holds
    if held is None:
        held = tuple(k for k, _ in recorded.keywords) if recorded else ()
    needed = {k for k, _ in end.keywords}
    if entry.bound is not None:  # a name the recording's scope did not bind was unbound then too
        needed &= set(entry.bound)
    missing = sorted(needed - set(held))
    return ", ".join(missing) if missing else None


def usable_checkpoints(
    commits: dict[int, Commit], ends: dict[str, EndCall], recorded: dict[str, EndCall]
) -> dict[int, str | None]:
    """Each committed iteration -> None if its checkpoints hold every value the edited
    script's ``end`` calls take, else what they lack (replay must re-execute there)."""
    out: dict[int, str | None] = {}
    for g, commit in commits.items():
        out[g] = None
        for block, entry in commit.blocks.items():
            name = block.rsplit("/", 1)[0]
            if (why := _lacks(entry, ends.get(name), recorded.get(name))) is not None:
                out[g] = f"block {name!r} lacks {why}"
                break
    return out


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay of one segment will do, decided before anything runs."""

    plan: Plan
    live: frozenset[int]
    probed: frozenset[str]
    usable: frozenset[int]  # committed iterations whose checkpoints hold what the edit reads
    ends: dict[str, EndCall]  # the edited script's SkipBlock.end calls, by block
    lacking: dict[int, str]  # committed but not usable: what the checkpoint lacks
    verify: frozenset[int] = frozenset()  # iterations whose blocks re-execute only to check
    hindsight: Hindsight | None = None  # where the edit runs (None: several loops)
    needed: Needed | None = None  # a sparse replay: the iterations it runs


def plan_replay(
    run: runs.RecordedRun,
    source: str,
    script: str,
    options: Options,
    in_step: bool = False,
    lookup: Lookup | None = no_lookup,
) -> ReplayPlan:
    """Plan a replay of ``run`` with the edited ``source``; one-line errors for what cannot be.

    A sparse plan's conditions may read names the loop never assigns, known once the loop
    starts: ``replan`` then plans its iterations again with them (``lookup=None``: only
    then; until it does, every iteration is planned to run). ``in_step``: the ranks
    of a job replay together, so they must run the same iterations: only checkpoints
    usable on every rank count, and ``replan`` runs what any rank needs."""
    recorded_files = project_sources(run.project, script, run.source)
    edited_files = project_sources(options.project, script, source)
    changes = compare(run.source, source, script, recorded_files, edited_files, seen(run))
    _check_blocks(changes, script)
    total = run.iterations
    index, count = options.segment
    if len(run.loops) > 1 and (count > 1 or options.iterations):
        raise FlorError(
            "several-loops",
            f"run {run.name}/{run.run_id} has {len(run.loops)} flor.it loops; "
            "segments and chosen iterations need a single main loop (replay it whole)",
        )
    check_segments(run, count)
    checked = usable_checkpoints(run.commits, changes.ends, changes.recorded_ends)
    usable = {g for g, why in checked.items() if why is None}
    for other in run.others if in_step else ():
        theirs = usable_checkpoints(other.commits, changes.ends, changes.recorded_ends)
        usable &= {g for g, why in theirs.items() if why is None}
    own = own_iterations(run)  # a fork's: those after its fork point
    start, stop = segment_bounds(total, count, usable, own)[index - 1]
    live = set(range(start, stop))
    if options.iterations:
        chosen = parse_iterations(options.iterations, total)
        if min(chosen) < own:
            raise FlorError(
                "bad-iterations",
                f"run {run.name}/{run.run_id} went on from run {run.meta.parent} after its "
                f"iteration {own - 1}: replay that run for iterations up to {own - 1}",
            )
        live &= chosen
    hindsight = None
    if len(run.loops) <= 1:
        hindsight = analyze_project(recorded_files, edited_files, script)
    plan, needed, verify = _iterations(run, live, usable, hindsight, options.verify, lookup)
    return ReplayPlan(
        plan,
        frozenset(live),
        changes.changed,
        frozenset(usable),
        changes.ends,
        {g: why for g, why in checked.items() if why is not None},
        verify,
        hindsight,
        needed,
    )


def seen(run: runs.RecordedRun) -> Seen | None:
    """Which callbacks the recording noted, and which of them each block ran."""
    ran = run.called
    return None if ran is None else Seen(frozenset(run.meta.callbacks), ran)


def _check_blocks(changes: BlockChanges, script: str) -> None:
    """The edited script's blocks must be the recorded ones: a one-line error if not."""
    if changes.missing or changes.added:
        parts = []
        if changes.missing:
            parts.append("missing now: " + ", ".join(sorted(changes.missing)))
        if changes.added:
            parts.append("not in the record: " + ", ".join(sorted(changes.added)))
        raise FlorError(
            "blocks-changed",
            f"{script}: SkipBlocks no longer match the record ({'; '.join(parts)}); "
            "replaying would restore state into the wrong code",
        )


def replan(
    run: runs.RecordedRun,
    decided: ReplayPlan,
    verify: int,
    lookup: Lookup,
    agree: Callable[[set[int]], set[int]] | None = None,
) -> ReplayPlan:
    """``decided`` with its iterations planned again, now that ``lookup`` knows more;
    ``agree``: the iterations any rank of the job needs, given this rank's."""
    plan, needed, checks = _iterations(
        run, set(decided.live), set(decided.usable), decided.hindsight, verify, lookup, agree
    )
    return replace(decided, plan=plan, needed=needed, verify=checks)


def _iterations(
    run: runs.RecordedRun,
    live: set[int],
    usable: set[int],
    hindsight: Hindsight | None,
    verify: int,
    lookup: Lookup | None,
    agree: Callable[[set[int]], set[int]] | None = None,
) -> tuple[Plan, Needed | None, frozenset[int]]:
    """What each iteration does (sparse where the edit allows, and ``lookup`` is given),
    and those re-run to check."""
    needed = None
    if hindsight is not None and hindsight.sparse and lookup is not None:
        needed = needed_iterations(run, hindsight, lookup, live)
        if agree is not None:  # a rank's conditions (`rank == 0`) may differ from another's
            needed = replace(needed, iterations=agree(needed.iterations))
        plan = sparse_plan(run.iterations, usable, needed.iterations, live, run.complete)
    else:
        plan = make_plan(run.iterations, usable, live, run.complete)
    runs_here = {g for g in live if plan.action(g) == LIVE}
    return plan, needed, sample_checks(sorted(usable & runs_here - plan.entries), verify)
