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


def loop_value(value: Any) -> dict[str, int]:
    """What of the loop's own value is a counter."""
    if type(value) is int:
        return {"@": value}
    if type(value) is tuple and value and type(value[0]) is int:
        return {"@0": value[0]}
    return {}


class LoopScalars:
    def __init__(self, watched: frozenset[str] | None = None) -> None:
        """``watched``: the loop's counters (None: every int and bool of its scope). A name
        the loop never assigns keeps the value it had at the loop's start, which a replay
        reads from its own process; a test of any other name is not evaluated from the
        record. So nothing else is noted (a scan of every global per iteration, at module
        level, was flor's largest cost; of every name the loop assigns, 5 us a DQN step)."""
        self._watched = None if watched is None else tuple(sorted(watched))
        self._last: dict[str, Any] = {}
        self._taken: dict[int, dict[str, Any]] = {}  # not yet journaled

    def note(self, iteration: int, scope: str, names: dict[str, Any], value: Any) -> None:
        """The values at the start of ``iteration`` (``names``: the loop's frame)."""
        if self._watched is None:
            now = {
                k: v for k, v in names.items() if type(v) in _KINDS and not k.startswith("_flor")
            }
        else:
            now = {}
            for k in self._watched:
                v = names.get(k)  # a missing name: None, not one of _KINDS
                if type(v) in _KINDS:
                    now[k] = v
        for key, v in loop_value(value).items():
            now[key] = v - iteration  # an offset: constant for range(start, stop)
        now["@scope"] = scope
        last = self._last
        if not self._taken:  # the entry's first iteration: everything
            changed = dict(now)
        elif now == last and all(type(v) is type(last[k]) for k, v in now.items()):
            changed = {}  # the common case, without a call per name (1 == True: types too)
        else:
            changed = {k: v for k, v in now.items() if k not in last or _differs(last[k], v)}
            changed.update(dict.fromkeys(last.keys() - now.keys()))
        self._taken[iteration] = changed
        self._last = now

    @property
    def current(self) -> dict[str, Any]:
        """The values the open iteration started with."""
        return self._last

    def take(self) -> dict[int, dict[str, Any]]:
        """The values noted since the last journal entry (the next one starts whole)."""
        taken, self._taken = self._taken, {}
        return taken


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
