"""The loop's counters and flags, per iteration: what a sparse replay evaluates conditions from.

At the start of every iteration the recorder notes the loop's counters
(``iter_num``; without the script's loop to tell which, every ``int`` and
``bool`` of its scope) and the loop's own value (``step`` of ``for step in
range(n)``). Only changes are kept: each journal entry's first iteration holds
every value (so a lost entry loses only its own iterations) and the others
hold what changed. A name whose value stops being an ``int``/``bool`` is
written as ``None``: not known from then on. Keys starting with ``@`` are
flor's: ``@scope`` names the function whose frame the values came from,
``@`` the loop's value as an offset from the iteration number, ``@0`` the
first item of a tuple value (``for i, batch in enumerate(loader)``).
"""

from __future__ import annotations

from typing import Any

_KINDS = (int, bool)
_KIND_SET = frozenset(_KINDS)
# iteration, scope, the watched names' values (a dict of every int and bool when none are
# watched), the loop value's counter as (key, offset from the iteration)
Row = tuple[int, str, Any, "tuple[str, int] | None"]


def _loop_counter(value: Any, iteration: int) -> tuple[str, int] | None:
    """What of the loop's own value is a counter, as an offset: constant for range()."""
    if type(value) is int:
        return ("@", value - iteration)
    if type(value) is tuple and value and type(value[0]) is int:
        return ("@0", value[0] - iteration)
    return None


class LoopScalars:
    def __init__(self, watched: frozenset[str] | None = None) -> None:
        """``watched``: the loop's counters (None: every int and bool of its scope). A name
        the loop never assigns keeps the value it had at the loop's start, which a replay
        reads from its own process; a test of any other name is not evaluated from the
        record. So nothing else is noted (a scan of every global per iteration, at module
        level, was flor's largest cost; of every name the loop assigns, 5 us a DQN step)."""
        self._watched = None if watched is None else tuple(sorted(watched))
        self._rows: list[Row] = []  # not yet journaled, as noted
        self._last: Row | None = None

    def note(self, iteration: int, scope: str, names: dict[str, Any], value: Any) -> None:
        """The values at the start of ``iteration`` (``names``: the loop's frame). Only a
        tuple per iteration: comparing it with the one before waits for the writer."""
        watched = self._watched
        if watched:
            now: Any = tuple(map(names.get, watched))
            if not _KIND_SET.issuperset(map(type, now)):
                # Anything but a counter is None here, as a missing name is: a name bound to
                # a batch or a tensor is not kept alive until the journal entry is written.
                now = tuple([v if type(v) in _KINDS else None for v in now])
        elif watched is None:
            now = {
                k: v for k, v in names.items() if type(v) in _KINDS and not k.startswith("_flor")
            }
        else:  # the loop has no counters: its value alone (a step loop over range())
            now = ()
        # Not the loop's value itself, which may be a batch: only what of it is a counter.
        counter = (
            ("@", value - iteration) if type(value) is int else _loop_counter(value, iteration)
        )
        self._last = row = (iteration, scope, now, counter)
        self._rows.append(row)

    @property
    def current(self) -> dict[str, Any]:
        """The values the open iteration started with."""
        return {} if self._last is None else _values(self._watched, self._last)

    def take(self) -> Noted:
        """The values noted since the last journal entry (the next one starts whole)."""
        rows, self._rows = self._rows, []
        return Noted(self._watched, rows)


class Noted:
    """A journal entry's values as noted, turned into what the journal keeps by
    ``changes``, which the writer thread calls, not the training loop."""

    def __init__(self, watched: tuple[str, ...] | None, rows: list[Row]) -> None:
        self._watched = watched
        self._rows = rows

    def changes(self) -> dict[int, dict[str, Any]]:
        """The first iteration's values whole, then each one's changes."""
        taken: dict[int, dict[str, Any]] = {}
        watched, before = self._watched, None
        for row in self._rows:
            if before is not None and watched is not None and row[1::2] == before[1::2]:
                # a loop without counters notes () each iteration: nothing to compare
                now = row[2]
                taken[row[0]] = _watched_changes(watched, before[2], now) if now else {}
            elif before is None:
                taken[row[0]] = _values(watched, row)
            else:
                taken[row[0]] = _changes(_values(watched, before), _values(watched, row))
            before = row
        return taken


def _values(watched: tuple[str, ...] | None, row: Row) -> dict[str, Any]:
    _, scope, noted, counter = row
    if watched is None:
        now = dict(noted)
    else:  # a missing name is None, not one of _KINDS
        now = {k: v for k, v in zip(watched, noted) if type(v) in _KINDS}
    if counter is not None:
        now[counter[0]] = counter[1]
    now["@scope"] = scope
    return now


def _watched_changes(
    watched: tuple[str, ...], before: tuple[Any, ...], now: tuple[Any, ...]
) -> dict[str, Any]:
    """What changed between two iterations of the same scope and loop offset."""
    if before == now and tuple(map(type, before)) == tuple(map(type, now)):
        return {}  # the common case (1 == True: types too); only ints, bools and None here
    changed: dict[str, Any] = {}
    for k, a, b in zip(watched, before, now):
        if type(b) in _KINDS:
            if type(a) not in _KINDS or _differs(a, b):
                changed[k] = b
        elif type(a) in _KINDS:
            changed[k] = None  # no longer a counter: not known from here on
    return changed


def _changes(last: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    if now == last and all(type(v) is type(last[k]) for k, v in now.items()):
        return {}  # the common case, without a call per name (1 == True: types too)
    changed = {k: v for k, v in now.items() if k not in last or _differs(last[k], v)}
    changed.update(dict.fromkeys(last.keys() - now.keys()))
    return changed


def _differs(a: Any, b: Any) -> bool:
    return a != b or type(a) is not type(b)


def replayed(
    journaled: dict[int, dict[str, Any]], firsts: set[int], total: int
) -> list[dict[str, Any] | None]:
    """Each iteration's values, rebuilt from the journal (``firsts``: each entry's first
    iteration); ``None`` where the journal does not tell."""
    out: list[dict[str, Any] | None] = []
    state: dict[str, Any] | None = None
    for g in range(total):
        changes = journaled.get(g)
        if changes is None:
            state = None
        elif g in firsts:
            state = dict(changes)
        elif state is not None:
            state = {**state, **changes}
        out.append(None if state is None else {k: v for k, v in state.items() if v is not None})
    return out
