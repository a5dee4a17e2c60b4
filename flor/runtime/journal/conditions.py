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

import itertools
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
        self._scans = [_compile_scan(guard) for guard in guards]
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
        lines = self._lines(reads, shifts, g, known, lookup, {})
        if lines is None:
            return None
        try:
            return bool(test(*[base for base, _ in lines]))
        except Exception:  # a value of another type than recorded: not known
            return None

    def ahead_of(
        self, i: int, g: int, known: Mapping[str, Any], steps: Mapping[str, int], lookup: Lookup
    ) -> list[Foreseen] | None:
        """Guard ``i``'s tests for the iterations after ``g`` (whose starting values are
        ``known``): each name read as ``base + slope * k`` in iteration ``g + k``. None if a
        value is not known."""
        out = []
        for compiled, test, shifts in self.guards[i]:
            lines = self._lines(test.names, shifts, g, known, lookup, steps)
            if lines is None:
                return None
            out.append((compiled, lines, test.holds))
        return out

    def first_may_hold(self, i: int, foreseen: list[Foreseen], limit: int) -> int:
        """The first ``k`` in 1..``limit`` where guard ``i``, as ``ahead_of`` foresaw it, may
        hold ``k`` iterations on (each test true, or the first not true not known); ``limit +
        1`` if none. One compiled loop: a test evaluated through a call per iteration made a
        scan of 500 iterations cost 75 us."""
        return self._scans[i](
            limit, *[x for _, lines, _ in foreseen for line in lines for x in line]
        )

    def _lines(
        self,
        reads: tuple[str, ...],
        shifts: dict[str, int],
        g: int,
        known: Mapping[str, Any],
        lookup: Lookup,
        steps: Mapping[str, int],
    ) -> list[tuple[Any, int]] | None:
        """Each name's value in iteration ``g`` and what one more iteration adds to it: the
        loop's value advances with the iteration, a counter by its ``steps`` per pass of the
        body, any other name stays (None: a value is not known)."""
        lines: list[tuple[Any, int]] = []
        for name in reads:
            if name in self.targets:
                offset = known.get(self.targets[name])
                value, slope = (MISSING, 0) if offset is None else (g + offset, 1)
            elif name in self.counters:
                start = known.get(name)
                value = MISSING if start is None else start + shifts.get(name, 0)
                slope = steps.get(name, 0)
            else:
                value, slope = known[name] if name in known else lookup(name), 0
            if value is MISSING:
                return None
            lines.append((value, slope))
        return lines


# A test foreseen: the compiled test, each name's value as (base, slope), the value it must have
Foreseen = tuple[Callable[..., Any], list[tuple[Any, int]], bool]


class Lookahead:
    """A recording's own periodic tests, evaluated for the iteration after the open one.

    Only *rare* tests count (firing in at most one of ``RARE`` iterations, as seen over
    the last ``WINDOW`` evaluations): evaluation and logging branches, not an update
    every 4 steps; and not a DQN's update test either once its learning has started,
    however long it did not fire before. A test that fires often is evaluated only at
    every ``RARE``-th call, enough to see it turn rare.

    Each iteration asked about foresees the next one where a test may fire: the tests read
    the loop's value and counters, which advance by a known step a pass, and names the loop
    never assigns. Until then (at most ``HORIZON`` iterations) the answer is no without an
    evaluation: a policy with budget to spare asks every iteration, and waited out the
    eve of a branch every 100 steps at 20 µs an ask. What it foresees is only where
    checkpoints are preferred: a counter that advances unevenly misplaces one, never a value.
    """

    RARE = 10
    WINDOW = 5 * RARE
    HORIZON = 500

    def __init__(self, guards: Guards, steps: Mapping[str, int]) -> None:
        self.guards = guards
        self.steps = steps  # counter -> how much one pass of the body advances it
        self.recent = [deque[bool](maxlen=self.WINDOW) for _ in guards.guards]
        self.fired = [0] * len(guards.guards)  # in recent
        self.calls = 0
        self.evaluations = 0  # of a guard, one iteration ahead (foreseeing is not one)
        self._quiet_from = 0  # from this iteration on, before the next, no test that may be
        self._quiet_until = 0  # rare fires (foreseen)
        self._foreseen: dict[int, int] = {}  # test -> the iteration it was seen firing, ahead
        self._nearest = 0  # the test foreseen to fire first, last time
        self._answered = (-1, False)  # the last iteration asked about, and the answer

    def quiet(self, target: int) -> bool:
        """Whether iteration ``target`` was foreseen to fire no test that may be rare."""
        return self._quiet_from <= target < self._quiet_until

    @property
    def quiet_until(self) -> int:
        """The first iteration after the last one asked about not foreseen to be quiet."""
        return self._quiet_until

    def next_fires(self, g: int, known: Mapping[str, Any], lookup: Lookup, ahead: int = 1) -> bool:
        """Whether a rare test fires in iteration ``g + ahead``; ``known``: what ``g`` started
        with."""
        target = g + ahead
        if self.quiet(target):
            return False
        if target == self._answered[0]:  # asked twice (by the fast lane, then the policy)
            return self._answered[1]
        then = dict(known)
        for name, step in self.steps.items():
            if name in then:
                then[name] += step * ahead
        self.calls += 1
        fires = False
        for i in range(len(self.recent)):
            if self.calls % self.RARE and self._frequent(i):
                continue  # frequent lately: its eves are not preferred
            holds = self.guards.holds(i, target, then, lookup)
            self.evaluations += 1
            if holds is None:
                continue
            if self._foreseen.get(i) != target:  # (else seen when it was foreseen)
                self._seen(i, holds)
            fires = fires or (holds and self._rare(i))
        # The iterations after it, foreseen whether or not it fires: a policy with no budget
        # left asks none, and its wait for the budget outlasts the next periodic iteration.
        self._quiet_from, self._quiet_until = target + fires, self._foresee(target, then, lookup)
        self._answered = (target, fires)
        return fires

    def _foresee(self, target: int, then: Mapping[str, Any], lookup: Lookup) -> int:
        """The first iteration after ``target`` (whose values are ``then``) where a test that
        is not frequent may hold; each one before it is seen as evaluated, every test false."""
        tests = {}
        for i in range(len(self.recent)):
            if not self._frequent(i):
                ahead = self.guards.ahead_of(i, target, then, self.steps, lookup)
                if ahead is None:
                    return target + 1  # not foreseeable: ask every time
                tests[i] = ahead
        if not tests:  # every test fires often lately: none is preferred
            return target + self.HORIZON + 1
        # Each scanned only as far as the others let it: the one that was nearest last
        # time first (a test every 500 steps is not scanned 500 ahead each 100 steps).
        k = self.HORIZON + 1
        for i in sorted(tests, key=lambda i: i != self._nearest):
            found = self.guards.first_may_hold(i, tests[i], k - 1)
            if found < k:
                k, self._nearest = found, i
        for i, guard in tests.items():
            self._seen(i, False, k - 1)
            if k <= self.HORIZON and _holds(guard, k):
                # Seen firing, too, where foreseen exactly: a test asked only on the eves
                # its foresight leaves (an update every 4 steps, whose eve found the budget
                # spent) would else look rare forever, and make every 4th iteration an eve.
                self._seen(i, True)
                self._foreseen[i] = target + k
        return target + k

    def _seen(self, i: int, holds: bool, times: int = 1) -> None:
        """Test ``i`` evaluated to ``holds``, ``times`` times over (only the last ``WINDOW``
        of them are kept: a foreseen stretch of 500 falses is one extend)."""
        recent = self.recent[i]
        times = min(times, self.WINDOW)
        dropped = max(len(recent) + times - self.WINDOW, 0)  # the oldest, pushed out
        self.fired[i] += holds * times - sum(itertools.islice(recent, dropped))
        recent.extend([holds] * times)

    def _rare(self, i: int) -> bool:
        """Test ``i`` fired in at most one of ``RARE`` of its recent evaluations."""
        seen = len(self.recent[i])
        return seen >= self.RARE and self.fired[i] * self.RARE <= seen

    def _frequent(self, i: int) -> bool:
        """Test ``i`` fired in more than one of ``RARE`` of its last ``WINDOW`` evaluations."""
        return len(self.recent[i]) == self.WINDOW and self.fired[i] * self.RARE > self.WINDOW


def _holds(guard: list[Foreseen], k: int) -> bool:
    """Whether every test of ``guard`` surely holds ``k`` iterations after it was foreseen
    (a test whose value is not known does not)."""
    for test, lines, wanted in guard:
        try:
            value = bool(test(*[base + slope * k if slope else base for base, slope in lines]))
        except Exception:  # not known
            return False
        if value != wanted:
            return False
    return True


def _compile(t: Test) -> Callable[..., Any]:
    """The test as a function of the names it reads, in order, without builtins (a
    function's arguments are read faster than an ``eval``'s dict of names)."""
    source = f"def test({', '.join(t.names)}):\n    return ({t.test})\n"
    namespace: dict[str, Any] = {"__builtins__": {}}
    exec(compile(source, f"<line {t.line}>", "exec"), namespace)
    return cast("Callable[..., Any]", namespace["test"])


def _compile_scan(guard: Sequence[Test]) -> Callable[..., int]:
    """``scan(limit, base, slope, ...)``: the first ``k`` in 1..``limit`` where every test of
    ``guard`` may hold with each name it reads (in order, test by test) at ``base + slope *
    k`` (``limit + 1``: none). A test that raises may hold; one false decides."""
    params, body = [], []
    for j, t in enumerate(guard):
        for m, name in enumerate(t.names):
            base, slope = f"_flor_b{j}_{m}", f"_flor_s{j}_{m}"
            params += [base, slope]
            body.append(f"{name} = {base} + {slope} * _flor_k if {slope} else {base}")
        body.append(f"if {'not ' if t.holds else ''}({t.test}): continue")
    lines = "\n            ".join([*body, "return _flor_k"])
    source = (
        f"def scan(_flor_limit, {', '.join(params)}):\n"
        "    for _flor_k in _flor_range(1, _flor_limit + 1):\n"
        "        try:\n"
        f"            {lines}\n"
        "        except _flor_Exception:  # not known: may hold\n"
        "            return _flor_k\n"
        "    return _flor_limit + 1\n"
    )
    namespace = {"__builtins__": {}, "_flor_range": range, "_flor_Exception": Exception}
    exec(compile(source, "<scan>", "exec"), namespace)
    return cast("Callable[..., int]", namespace["scan"])


def lookup_in(names: Mapping[str, Any]) -> Lookup:
    return lambda name: names.get(name, MISSING)


def lookup_frame(local: Mapping[str, Any], global_: Mapping[str, Any]) -> Lookup:
    """A frame's names, locals first, without merging them up front."""
    return lambda name: local.get(name, global_.get(name, MISSING))


def no_lookup(name: str) -> Any:
    return MISSING
