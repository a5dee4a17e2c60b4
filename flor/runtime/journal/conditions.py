"""Evaluating the main loop's ``if`` tests for an iteration, from its counters alone.

``flor.transform.hindsight`` finds the tests and what they read; the values
come from ``loop_scalars`` (the loop's value, its counters at the start of the
iteration, plus the increments the body runs before the test) and, for names
the loop never assigns, from a lookup. A recording evaluates its own tests one
iteration ahead, to checkpoint right before its periodic branches; a replay
evaluates the edit's tests for every recorded iteration, to run only those
where they hold. ``None`` means the values are not known: the caller must
assume the test holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

MISSING = object()
Lookup = Callable[[str], Any]  # a name the loop never assigns -> its value, or MISSING


class Test(Protocol):
    @property
    def test(self) -> str: ...
    @property
    def holds(self) -> bool: ...  # False: what it guards is its ``else``
    @property
    def line(self) -> int: ...
    @property
    def names(self) -> tuple[str, ...]: ...
    @property
    def shifts(self) -> tuple[tuple[str, int], ...]: ...


class LoopFacts(Protocol):
    @property
    def targets(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def counters(self) -> frozenset[str]: ...


class Guards:
    """Statements' guards (each a conjunction of tests), compiled once."""

    def __init__(self, guards: Sequence[Sequence[Test]], facts: LoopFacts) -> None:
        self.guards = [[(_compile(t), t, dict(t.shifts)) for t in guard] for guard in guards]
        self.targets = dict(facts.targets)
        self.counters = facts.counters

    def any_holds(self, g: int, known: Mapping[str, Any], lookup: Lookup) -> bool | None:
        """Whether some guard holds in iteration ``g``, whose starting values are ``known``."""
        unknown = False
        for i in range(len(self.guards)):
            holds = self.holds(i, g, known, lookup)
            if holds:
                return True
            unknown = unknown or holds is None
        return None if unknown else False

    def holds(self, i: int, g: int, known: Mapping[str, Any], lookup: Lookup) -> bool | None:
        """Whether guard ``i`` holds in iteration ``g``; None if that is not known."""
        unknown = False
        for compiled, test, shifts in self.guards[i]:
            value = self._evaluate(compiled, test.names, shifts, g, known, lookup)
            if value is None:
                unknown = True
            elif value != test.holds:
                return False  # one false test decides, whatever the others are
        return None if unknown else True

    def _evaluate(
        self,
        test: Callable[..., Any],
        reads: tuple[str, ...],
        shifts: dict[str, int],
        g: int,
        known: Mapping[str, Any],
        lookup: Lookup,
    ) -> bool | None:
        values: list[Any] = []
        for name in reads:
            if name in self.targets:
                offset = known.get(self.targets[name])
                value = MISSING if offset is None else g + offset
            elif name in self.counters:
                start = known.get(name)
                value = MISSING if start is None else start + shifts.get(name, 0)
            elif name in known:
                value = known[name]
            else:
                value = lookup(name)
            if value is MISSING:
                return None
            values.append(value)
        try:
            return bool(test(*values))
        except Exception:  # a value of another type than recorded: not known
            return None


class Lookahead:
    """A recording's own periodic tests, evaluated for the iteration after the open one.

    Only *rare* tests count (firing in at most one of ``RARE`` iterations, as seen over
    the last ``WINDOW`` evaluations): evaluation and logging branches, not an update
    every 4 steps; and not a DQN's update test either once its learning has started,
    however long it did not fire before. A test that fires often is evaluated only at
    every ``RARE``-th call, enough to see it turn rare.
    """

    RARE = 10
    WINDOW = 5 * RARE

    def __init__(self, guards: Guards, steps: Mapping[str, int]) -> None:
        self.guards = guards
        self.steps = steps  # counter -> how much one pass of the body advances it
        self.recent = [deque[bool](maxlen=self.WINDOW) for _ in guards.guards]
        self.fired = [0] * len(guards.guards)  # in recent
        self.calls = 0

    def next_fires(self, g: int, known: Mapping[str, Any], lookup: Lookup, ahead: int = 1) -> bool:
        """Whether a rare test fires in iteration ``g + ahead``; ``known``: what ``g`` started
        with."""
        then = dict(known)
        for name, step in self.steps.items():
            if name in then:
                then[name] += step * ahead
        self.calls += 1
        fires = False
        for i, recent in enumerate(self.recent):
            if self.calls % self.RARE and self._frequent(i):
                continue  # frequent lately: its eves are not preferred
            holds = self.guards.holds(i, g + ahead, then, lookup)
            if holds is None:
                continue
            self.fired[i] += holds - (recent[0] if len(recent) == self.WINDOW else 0)
            recent.append(holds)
            fires = fires or (holds and self._rare(i))
        return fires

    def _rare(self, i: int) -> bool:
        """Test ``i`` fired in at most one of ``RARE`` of its recent evaluations."""
        seen = len(self.recent[i])
        return seen >= self.RARE and self.fired[i] * self.RARE <= seen

    def _frequent(self, i: int) -> bool:
        """Test ``i`` fired in more than one of ``RARE`` of its last ``WINDOW`` evaluations."""
        return len(self.recent[i]) == self.WINDOW and self.fired[i] * self.RARE > self.WINDOW


def _compile(t: Test) -> Callable[..., Any]:
    """The test as a function of the names it reads, in order, without builtins (a
    function's arguments are read faster than an ``eval``'s dict of names)."""
    source = f"def test({', '.join(t.names)}):\n    return ({t.test})\n"
    namespace: dict[str, Any] = {"__builtins__": {}}
    exec(compile(source, f"<line {t.line}>", "exec"), namespace)
    return cast("Callable[..., Any]", namespace["test"])


def lookup_in(names: Mapping[str, Any]) -> Lookup:
    return lambda name: names.get(name, MISSING)


def lookup_frame(local: Mapping[str, Any], global_: Mapping[str, Any]) -> Lookup:
    """A frame's names, locals first, without merging them up front."""
    return lambda name: local.get(name, global_.get(name, MISSING))


def no_lookup(name: str) -> Any:
    return MISSING
