"""A journal entry's per-iteration series, stored compactly.

A commit journals every iteration since the one before: its seconds and its loop
counters. Written as a JSON object per iteration, a loop of microsecond steps spent
more of the writer's time (the GIL the loop needs) on them than on anything else, and a
run of a million steps journaled tens of megabytes. So the recorder hands them over as
mappings that store themselves compactly: ``Timings`` as one list of whole microseconds
over consecutive iterations, ``CounterRuns`` column by column as runs (a counter that
advances by the same step every iteration is one run, however long the loop). Read
back, each is the same mapping again, and writes back as it was read.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Mapping
from typing import Any

Run = list[Any]  # [value, step, count]: value, value + step, ... (step 0: repeated as is)


class Timings(Mapping[int, float]):
    """Seconds per iteration over consecutive iterations from ``first``:
    ``[first, [microseconds, ...]]`` on disk."""

    def __init__(self, first: int, seconds: list[float]) -> None:
        self.first = first
        self.seconds = seconds

    @classmethod
    def of(cls, timings: dict[int, float]) -> Mapping[int, float]:
        """``timings`` as one list where its iterations are consecutive (a recorder's are)."""
        if not timings:
            return timings
        first = next(iter(timings))
        if list(timings) != list(range(first, first + len(timings))):
            return timings
        return cls(first, list(timings.values()))

    def to_json(self) -> list[Any]:
        return [self.first, list(map(round, map((1e6).__mul__, self.seconds)))]

    @classmethod
    def from_json(cls, value: list[Any]) -> Timings:
        first, micros = value
        return cls(first, [us / 1e6 for us in micros])

    def __getitem__(self, iteration: int) -> float:
        i = iteration - self.first
        if 0 <= i < len(self.seconds):
            return self.seconds[i]
        raise KeyError(iteration)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.first + len(self.seconds)))

    def __len__(self) -> int:
        return len(self.seconds)


class CounterRuns(Mapping[int, Mapping[str, Any]]):
    """The loop's counters per iteration, as changes (the first iteration's values whole,
    then what each one changed; ``None``: no longer known), kept column by column as runs:
    ``{"iterations": RUNS, "values": {name: RUNS}}`` on disk, a missing value ``None``."""

    def __init__(self, iterations: list[Run], columns: dict[str, list[Run]]) -> None:
        self.iterations = iterations
        self.columns = columns  # name -> its runs

    @classmethod
    def of_columns(cls, iterations: list[int], columns: dict[str, list[Any]]) -> CounterRuns:
        """``columns``: each name's value in each of ``iterations`` (``None``: missing)."""
        return cls(_runs(iterations), {name: _runs(col) for name, col in columns.items()})

    def to_json(self) -> dict[str, Any]:
        return {"iterations": self.iterations, "values": self.columns}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> CounterRuns:
        return cls(value["iterations"], dict(value["values"]))

    @functools.cached_property
    def _changes(self) -> dict[int, dict[str, Any]]:
        iterations = _expanded(self.iterations)
        changes: dict[int, dict[str, Any]] = {g: {} for g in iterations}
        for name, runs in self.columns.items():
            values = _expanded(runs)
            if values and values[0] is not None:  # the first iteration: what is known
                changes[iterations[0]][name] = values[0]
            for g, before, value in zip(iterations[1:], values, values[1:]):
                if value != before or type(value) is not type(before):
                    changes[g][name] = value
        return changes

    def __getitem__(self, iteration: int) -> Mapping[str, Any]:
        return self._changes[iteration]

    def __iter__(self) -> Iterator[int]:
        return iter(self._changes)

    def __len__(self) -> int:
        return sum(run[2] for run in self.iterations)


def _runs(column: list[Any]) -> list[Run]:
    """``column`` as runs: of ints (not bools) by a constant step, else of equal values."""
    n = len(column)
    if n == 0:
        return []
    first = column[0]
    one_type = len(set(map(type, column))) == 1  # (True == 1: types too)
    if one_type and type(first) is int and n > 1:
        step = column[1] - first
        if step and column == list(range(first, first + step * n, step)):
            return [[first, step, n]]  # the common counter, checked in C
    if one_type and column.count(first) == n:
        return [[first, 0, n]]
    runs: list[Run] = []
    i = 0
    while i < n:
        value, j, step = column[i], i + 1, 0
        if type(value) is int and j < n and type(column[j]) is int and column[j] != value:
            step = column[j] - value
            while j < n and type(column[j]) is int and column[j] - column[j - 1] == step:
                j += 1
        else:
            while j < n and column[j] == value and type(column[j]) is type(value):
                j += 1
        runs.append([value, step, j - i])
        i = j
    return runs


def _expanded(runs: list[Run]) -> list[Any]:
    out: list[Any] = []
    for value, step, count in runs:
        if step:
            out.extend(range(value, value + step * count, step))
        else:
            out.extend(itertools.repeat(value, count))
    return out
