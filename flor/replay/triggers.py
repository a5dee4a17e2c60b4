"""Which iterations an edit's statements run in, evaluated from the record (sparse replay).

``flor.transform.hindsight`` says under which ``if`` tests the edited
statements of the main loop sit; this evaluates those tests for each recorded
iteration (``flor.runtime.journal.conditions``), from the loop's recorded counters
and, for names the loop never assigns, from the replaying process itself
(which ran the same code up to the loop). Where a value is not known the
iteration counts as needed: unsure means run it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from flor.runs import RecordedRun
from flor.runtime.journal.conditions import Guards, Lookup
from flor.runtime.journal.loop_scalars import replayed
from flor.transform.hindsight import Hindsight


@dataclass(frozen=True)
class Needed:
    iterations: set[int]  # where an edited statement runs (or may: unknown ones included)
    unknown: int  # of which the record could not tell
    reason: str | None = None  # why none could be told


def needed_iterations(
    run: RecordedRun, hindsight: Hindsight, lookup: Lookup, among: Iterable[int]
) -> Needed:
    """The iterations of ``among`` where some edited statement of the loop runs."""
    chosen = sorted(among)
    values = replayed(run.scalars, run.scalar_firsts, run.iterations)
    scopes = {v.get("@scope") for v in values if v is not None}
    if scopes - {hindsight.scope}:
        why = f"the record's counters come from {sorted(map(str, scopes))}, not {hindsight.scope}"
        return Needed(set(chosen), len(chosen), why)
    guards = Guards(hindsight.guards, hindsight)
    needed, unknown = set(), 0
    for g in chosen:
        known = values[g] if g < len(values) else None
        fires = None if known is None else guards.any_holds(g, known, lookup)
        if fires is None:
            unknown += 1
        if fires is not False:
            needed.add(g)
    return Needed(needed, unknown)
