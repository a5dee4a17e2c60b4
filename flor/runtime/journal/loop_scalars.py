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

from collections.abc import Mapping
from typing import Any

from flor.runs.series import CounterRuns

_KINDS = (int, bool)
_KIND_SET = frozenset(_KINDS)


def _loop_counter(value: Any, iteration: int) -> tuple[str, int] | None:
    """What of a loop's value that is not an int is a counter, as an offset: the first item
    of a tuple (``for i, batch in enumerate(loader)``)."""
    if type(value) is tuple and value and type(value[0]) is int:
        return ("@0", value[0] - iteration)
    return None


class Columns:
    """Iterations' values as noted, column by column: lists of ints and Nones, which the
    garbage collector does not track (a tuple per iteration, kept until the journal entry,
    had it walk them, and a run of short steps paid a full collection). The iterations are
    consecutive, and of one loop (its frame's ``scope``): a loop's end takes what it noted."""

    def __init__(self) -> None:
        self.first = 0  # the first iteration noted
        self.scope = ""
        # the loop's value as noted: an int, its offset from the iteration number (range()'s
        # "@"), else (key, offset) for what of it is a counter, or None
        self.counters: list[Any] = []
        self.values: list[Any] = []  # the watched counter's; a tuple each of several's

    @property
    def last(self) -> int:
        """The last iteration noted."""
        return self.first + len(self.counters) - 1


class LoopScalars:
    def __init__(self, watched: frozenset[str] | None = None) -> None:
        """``watched``: the loop's counters (None: every int and bool of its scope). A name
        the loop never assigns keeps the value it had at the loop's start, which a replay
        reads from its own process; a test of any other name is not evaluated from the
        record. So nothing else is noted (a scan of every global per iteration, at module
        level, was flor's largest cost; of every name the loop assigns, 5 us a DQN step)."""
        self._watched = None if watched is None else tuple(sorted(watched))
        # The common cases, no counter or one, noted without a call: 0.1 us, not 0.4.
        self._one = self._watched[0] if self._watched and len(self._watched) == 1 else None
        self._several = self._watched is None or len(self._watched) > 1
        self._noted = Columns()  # not yet journaled
        self._last: dict[str, Any] = {}  # the values of the last iteration taken
        # A loop with no counters notes only its value: where it is an int, its offset from
        # the iteration number, appended without a Python call (the recorder's fast lane
        # does, after a journal entry's first iteration, which ``note`` begins; None: notes
        # take ``note``). Half of a fast iteration's time inside a DQN step, cold, was the call.
        self.append_offset = self._noted.counters.append if self._watched == () else None

    def note(self, iteration: int, scope: str, names: dict[str, Any], value: Any) -> None:
        """The values at the start of ``iteration`` (``names``: the loop's frame): appended
        to columns; comparing them with the ones before waits for the writer. Anything but
        a counter is None here, as a missing name is: a name bound to a batch or a tensor is
        not kept alive until the journal entry is written."""
        noted = self._noted
        if not noted.counters:  # the first since the last journal entry: of one loop
            noted.first, noted.scope = iteration, scope
        # Not the loop's value itself, which may be a batch: only what of it is a counter.
        noted.counters.append(
            value - iteration if type(value) is int else _loop_counter(value, iteration)
        )
        one = self._one
        if one is not None:
            v = names.get(one)
            noted.values.append(v if type(v) in _KIND_SET else None)
        elif self._several:
            noted.values.append(self._values_of(names))

    def _values_of(self, names: dict[str, Any]) -> Any:
        watched = self._watched
        if watched is None:
            return {
                k: v for k, v in names.items() if type(v) in _KINDS and not k.startswith("_flor")
            }
        now = tuple(map(names.get, watched))
        if not _KIND_SET.issuperset(map(type, now)):
            now = tuple([v if type(v) in _KINDS else None for v in now])
        return now

    @property
    def current(self) -> dict[str, Any]:
        """The values the open iteration started with."""
        noted = self._noted
        if not noted.counters:
            return self._last
        return _values(self._watched, self._one, noted, len(noted.counters) - 1)

    def take(self) -> Noted:
        """The values noted since the last journal entry (the next one starts whole)."""
        noted, self._noted = self._noted, Columns()
        if self.append_offset is not None:
            self.append_offset = self._noted.counters.append
        if noted.counters:
            self._last = _values(self._watched, self._one, noted, len(noted.counters) - 1)
        return Noted(self._watched, self._one, noted)


class Noted:
    """A journal entry's values as noted, turned into what the journal keeps by
    ``changes``, which the writer thread calls, not the training loop."""

    def __init__(self, watched: tuple[str, ...] | None, one: str | None, noted: Columns) -> None:
        self._watched = watched
        self._one = one
        self._noted = noted

    def changes(self) -> Mapping[int, Mapping[str, Any]]:
        """The first iteration's values whole, then each one's changes, kept column by
        column (``CounterRuns``)."""
        noted = self._noted
        if not noted.counters:
            return {}
        watched, values = self._watched, noted.values
        if self._one is not None:
            columns = {self._one: values}
        elif watched is None:  # a dict each of its own names
            names = dict.fromkeys(k for now in values for k in now)
            columns = {k: [now.get(k) for now in values] for k in names}
        elif watched:
            columns = dict(zip(watched, map(list, zip(*values))))
        else:
            columns = {}
        counters = noted.counters
        kinds = set(counters)
        if any(type(c) is int for c in kinds):  # range()'s offsets
            columns["@"] = [c if type(c) is int else None for c in counters]
        for key in sorted({c[0] for c in kinds if type(c) is tuple}):
            columns[key] = [c[1] if type(c) is tuple and c[0] == key else None for c in counters]
        columns["@scope"] = [noted.scope] * len(counters)
        return CounterRuns.of_columns(list(range(noted.first, noted.last + 1)), columns)


def _values(
    watched: tuple[str, ...] | None, one: str | None, noted: Columns, i: int
) -> dict[str, Any]:
    """Iteration ``i``'s values (of those noted), by name."""
    if one is not None:
        v = noted.values[i]
        now = {} if v is None else {one: v}
    elif watched is None:
        now = dict(noted.values[i])
    elif watched:  # a missing name is None, not one of _KINDS
        now = {k: v for k, v in zip(watched, noted.values[i]) if type(v) in _KINDS}
    else:  # the loop has no counters: its value alone (a step loop over range())
        now = {}
    counter = noted.counters[i]
    if type(counter) is int:
        now["@"] = counter
    elif counter is not None:
        now[counter[0]] = counter[1]
    now["@scope"] = noted.scope
    return now


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
