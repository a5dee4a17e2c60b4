"""A journal entry's per-iteration series: stored compactly, read back exactly as noted."""

from __future__ import annotations

import json
import random
from typing import Any

from flor.runs.records import Commit
from flor.runs.series import CounterRuns, Timings
from flor.runtime.journal.loop_scalars import LoopScalars


def _stored(commit: Commit) -> Commit:
    return Commit.from_json(json.loads(json.dumps(commit.to_json(), sort_keys=True)))


def _changes(rows: list[dict[str, Any]], first: int) -> dict[int, dict[str, Any]]:
    """What the journal must say of ``rows`` (each iteration's known values): the first
    whole, then each one's changes, ``None`` where a value is no longer known."""
    out: dict[int, dict[str, Any]] = {}
    before: dict[str, Any] | None = None
    for g, now in enumerate(rows, start=first):
        if before is None:
            out[g] = dict(now)
        else:
            out[g] = {k: v for k, v in now.items() if k not in before or before[k] != v
                      or type(before[k]) is not type(v)}  # fmt: skip
            out[g].update(dict.fromkeys(before.keys() - now.keys()))
        before = now
    return out


def test_noted_counters_read_back_as_each_iteration_changed_them() -> None:
    """Random counters, flags, values that stop being counters and loop values of every
    kind, over two journal entries: what the journal reads back is exactly what changed,
    iteration by iteration; noted as the recorder's fast lane notes a loop over ints
    without counters too (``append_offset``, after an entry's first iteration)."""
    rng = random.Random(5)
    first, rows = 0, []
    for trial in range(600):
        if trial % 2 == 0:
            watched = rng.choice([None, frozenset(), frozenset({"a"}), frozenset({"a", "b"})])
            scalars, start = LoopScalars(watched), rng.randrange(100)
        else:  # the second entry of the same loop
            start = first + len(rows)
        rows, first, a = [], start, 0
        for i in range(rng.randrange(1, 40)):
            g = first + i
            a += rng.choice([0, 1, 1, 2])
            names = {"a": rng.choice([a, a, True, 1, "text", 1.5]), "b": a + i}
            if rng.random() < 0.2:
                del names["a"]
            value = rng.choice([g + 3, g + 3, (g, "batch"), "batch", True])
            append = scalars.append_offset
            if i and append is not None and type(value) is int and rng.random() < 0.5:
                append(value - g)
            else:
                scalars.note(g, "train", names, value)
            known = {k: v for k, v in names.items() if type(v) in (int, bool)}
            if watched is not None:
                known = {k: v for k, v in known.items() if k in watched}
            if type(value) is int:
                known["@"] = value - g
            elif type(value) is tuple:
                known["@0"] = value[0] - g
            rows.append({**known, "@scope": "train"})
        changes = scalars.take().changes()
        expected = _changes(rows, first)
        assert {g: dict(c) for g, c in changes.items()} == expected
        back = _stored(Commit(first + len(rows) - 1, scalars=changes)).scalars
        assert {g: dict(c) for g, c in back.items()} == expected
        for g, c in expected.items():  # 1 and True alike are told apart
            assert {k: type(v) for k, v in back[g].items()} == {k: type(v) for k, v in c.items()}


def test_a_million_steps_of_a_counter_journal_in_a_few_bytes() -> None:
    """A step counter advanced by one every iteration is one run, however long the loop:
    the journal of a run of millions of steps stays cheap to write, list and plan."""
    scalars = LoopScalars(frozenset({"step"}))
    for g in range(1_000_000):
        scalars.note(g, "<module>", {"step": g + 1}, g)
    changes = scalars.take().changes()
    stored = json.dumps(Commit(999_999, scalars=changes).to_json())
    assert len(stored) < 400
    back = _stored(Commit(999_999, scalars=changes)).scalars
    assert back[0] == {"step": 1, "@": 0, "@scope": "<module>"}
    assert back[500_000] == {"step": 500_001} and len(back) == 1_000_000


def test_timings_are_one_list_where_consecutive_and_load_as_stored() -> None:
    consecutive = Timings.of({5: 0.25, 6: 0.5, 7: 0.000001})
    commit = Commit(7, timings=consecutive, block_timings=Timings.of({6: 0.1}))
    assert commit.to_json()["timings_us"] == [5, [250000, 500000, 1]]
    back = _stored(commit)
    assert dict(back.timings) == {5: 0.25, 6: 0.5, 7: 0.000001}
    assert dict(back.block_timings) == {6: 0.1}
    assert back.to_json() == commit.to_json(), "and writes back as it was read"
    gaps = Timings.of({1: 0.5, 3: 0.5})
    assert type(gaps) is dict, "iterations with gaps keep the older form"


def test_the_older_per_iteration_form_still_loads() -> None:
    older = {"iteration": 2, "timings_us": {"1": 500000, "2": 250000},
             "scalars": {"1": {"step": 1, "@scope": "f"}, "2": {"step": 2}}}  # fmt: skip
    commit = Commit.from_json(older)
    assert commit.timings == {1: 0.5, 2: 0.25} and commit.scalars[2] == {"step": 2}
    stored = json.loads(json.dumps(commit.to_json()))
    assert (stored["timings_us"], stored["scalars"]) == (older["timings_us"], older["scalars"])
    runs = CounterRuns.of_columns([4, 5, 6], {"flag": [True, True, 1]})
    assert dict(runs) == {4: {"flag": True}, 5: {}, 6: {"flag": 1}}
