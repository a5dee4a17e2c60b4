from __future__ import annotations

import pytest

from flor.errors import FlorError
from flor.replay.plan import (
    DEAD,
    ECHO,
    LIVE,
    QUIET,
    REBUILD,
    make_plan,
    parse_iterations,
    sample_checks,
    segment_bounds,
    sparse_plan,
    usable_checkpoints,
)
from flor.runs.records import Commit
from flor.transform import EndCall


def test_segments_partition_and_start_after_checkpoints() -> None:
    bounds = segment_bounds(10, 3, committed={0, 2, 4, 6, 8})
    assert bounds == [(0, 3), (3, 7), (7, 10)]
    assert all(start - 1 in {0, 2, 4, 6, 8} for start, _ in bounds[1:])


def test_segments_snap_to_nearby_checkpoint() -> None:
    assert segment_bounds(12, 2, committed={4}) == [(0, 5), (5, 12)]
    assert segment_bounds(12, 2, committed={0}) == [(0, 6), (6, 12)]  # too far: stay even


@pytest.mark.parametrize("total,n", [(0, 1), (1, 3), (7, 7), (100, 6), (13, 4)])
def test_segments_always_partition(total: int, n: int) -> None:
    bounds = segment_bounds(total, n, committed=set(range(0, total, 3)))
    assert len(bounds) == n
    assert [i for a, b in bounds for i in range(a, b)] == list(range(total))


def test_plan_restores_nearest_checkpoint_then_runs_quietly() -> None:
    plan = make_plan(10, committed={0, 4}, live={7, 8}, complete=True)
    assert plan.actions == (DEAD,) * 4 + (QUIET,) * 3 + (LIVE, LIVE, DEAD)
    assert plan.entries == {4}
    assert not plan.natural_end and plan.last_live == 8


def test_plan_without_checkpoints_starts_from_zero() -> None:
    plan = make_plan(5, committed=set(), live={3, 4}, complete=True)
    assert plan.actions == (QUIET, QUIET, QUIET, LIVE, LIVE)
    assert plan.entries == frozenset() and plan.natural_end


def test_plan_of_whole_run_and_incomplete_run() -> None:
    assert make_plan(3, {0, 1, 2}, {0, 1, 2}, complete=True).actions == (LIVE,) * 3
    assert not make_plan(3, {0, 1, 2}, {0, 1, 2}, complete=False).natural_end


def test_plan_for_two_stretches_reuses_state_when_cheaper() -> None:
    plan = make_plan(10, committed={5}, live={1, 2, 8}, complete=True)
    assert plan.actions[:3] == (QUIET, LIVE, LIVE)
    assert plan.entries == {5} and plan.actions[5:9] == (QUIET, QUIET, QUIET, LIVE)


def test_parse_iterations() -> None:
    assert parse_iterations("9", 200) == {9}
    assert parse_iterations("0-2, 5", 10) == {0, 1, 2, 5}
    with pytest.raises(FlorError, match="outside"):
        parse_iterations("10", 10)
    with pytest.raises(FlorError, match="use e.g."):
        parse_iterations("a-b", 10)


def _commit(holds: list[str], bound: list[str], objs: int = 0) -> Commit:
    return Commit.from_json(
        {
            "iteration": 0,
            "blocks": {
                "train/0": {
                    "key": "k",
                    "sha256": "",
                    "bytes": 0,
                    "objs": objs,
                    "holds": holds,
                    "bound": bound,
                }  # fmt: skip
            },
        }
    )


def test_a_checkpoint_is_usable_when_it_holds_what_the_edited_end_takes() -> None:
    edited = {"train": EndCall((), (("model", "model"), ("loss", None)))}
    commits = {
        0: _commit(["model"], ["model"]),  # loss not bound yet when recorded: UNBOUND is right
        1: _commit(["loss", "model"], ["loss", "model"]),
        2: _commit(["model"], ["loss", "model"]),  # loss was bound, but too big to keep
    }
    usable = usable_checkpoints(commits, edited, {})
    assert usable[0] is None and usable[1] is None
    assert usable[2] == "block 'train' lacks loss"


def test_positional_values_must_match_the_record() -> None:
    edited = {"train": EndCall(("model", "loss"), ())}
    assert usable_checkpoints({0: _commit([], [], objs=2)}, edited, {})[0] is None
    assert "2 positional values where the record has 1" in str(
        usable_checkpoints({0: _commit([], [], objs=1)}, edited, {})[0]
    )


def test_checks_are_spread_evenly_and_bounded() -> None:
    assert sample_checks(list(range(10)), 2) == {2, 7}
    assert sample_checks([4, 5], 5) == {4, 5}
    assert sample_checks(list(range(10)), 0) == frozenset()


def test_sparse_plan_runs_only_what_the_edit_needs_and_echoes_the_rest() -> None:
    # 12 iterations shown, the edit runs in 5 and 10; checkpoints at 4 and 8
    plan = sparse_plan(12, committed={4, 8}, needed={5, 10}, shown=set(range(12)), complete=False)
    assert plan.actions == ((ECHO,) * 4 + (REBUILD, LIVE, ECHO, ECHO, REBUILD, LIVE, LIVE, ECHO))
    assert plan.entries == {4, 8} and plan.last_live == 11


def test_sparse_plan_runs_the_last_iteration_for_the_code_after_the_loop() -> None:
    plan = sparse_plan(6, committed={3}, needed=set(), shown=set(range(6)), complete=True)
    assert plan.actions == (ECHO, ECHO, ECHO, REBUILD, LIVE, LIVE) and plan.natural_end
    unfinished = sparse_plan(6, committed={3}, needed=set(), shown=set(range(6)), complete=False)
    assert unfinished.actions == (ECHO,) * 6 and not unfinished.natural_end


def test_threads_per_replay_process() -> None:
    from flor.launch.replay import _threads

    assert _threads(None, 2, 16) is None  # the recorded count: bitwise parity
    assert _threads("auto", 2, 16) == 8 and _threads("auto", 4, 2) == 1
    assert _threads("3", 2, 16) == 3
    with pytest.raises(FlorError, match="--threads 'x'"):
        _threads("x", 1, 2)


def test_the_summary_counts_iterations_in_words_a_user_reads() -> None:
    from flor.replay.tally import ReplayTally

    tally = ReplayTally()
    for g, quiet in ((0, True), (1, False)):
        tally.begin(quiet)
        tally.end(g)
    line = tally.summary()
    assert line.startswith("replayed 1 iteration: 1 restored")
    assert "before them, 1 iteration run without output to rebuild the state" in line
