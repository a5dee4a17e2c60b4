"""The run's records read and write the JSON the store has always held."""

from __future__ import annotations

import json
from dataclasses import replace

from flor.runs.records import CheckpointEntry, Commit, LoopEnd, RunMeta, SegmentResult


def test_records_round_trip_their_json() -> None:
    commit = {
        "iteration": 3,
        "blocks": {
            "train/0": {
                "key": "k",
                "sha256": "s",
                "bytes": 9,
                "blobs": {"ab": 70000},
                "new_blob_bytes": 0,
                "objs": 2,
                "holds": ["loss"],
                "bound": ["loss", "model"],
            }
        },  # fmt: skip
        "stdout": {"3": "epoch 3\n"},
        "timings_us": {"2": 500000, "3": 250001},
        "block_timings_us": {"3": 200000},
    }
    typed = Commit.from_json(commit)
    assert typed.timings == {2: 0.5, 3: 0.250001} and typed.blocks["train/0"].holds == ("loss",)
    assert json.loads(json.dumps(typed.to_json(), sort_keys=True)) == commit  # as stored
    loop = {"loop": 0, "first": 0, "count": 4, "status": "exhausted", "stdout": {},
            "timings_us": {}, "block_timings_us": {}}  # fmt: skip
    assert LoopEnd.from_json(loop).end == 4 and LoopEnd.from_json(loop).to_json() == loop
    segment = {"run_id": "r", "segment": [1, 2], "iterations": [0, 1], "probed": [],
               "output": {"pre": "", "0": "a\n"}, "logs": [], "finished": 1.0,
               "diverged": "iteration 1, block 'b', in model"}  # fmt: skip
    assert SegmentResult.from_json(segment).to_json() == segment


def test_older_records_load_and_keep_what_they_do_not_know() -> None:
    seconds = Commit.from_json({"iteration": 3, "timings": {"3": 0.25}, "block_timings": {}})
    assert seconds.timings == {3: 0.25} and seconds.to_json()["timings_us"] == {3: 250000}
    entry = CheckpointEntry.from_json({"key": "k", "sha256": "s", "bytes": 1})
    assert (entry.objs, entry.holds, entry.bound) == (None, None, None)  # the plan then asks
    meta = RunMeta.from_json({"name": "n", "argv": ["t.py", "3"], "someday": {"x": 1}})
    assert meta.argv == ("t.py", "3") and meta.to_json()["someday"] == {"x": 1}
    assert meta.updated(status="finished").to_json()["status"] == "finished"


def test_an_overhead_over_its_budget_says_what_no_budget_could_skip() -> None:
    """A short run pays flor's start-up whole: the summary says so, not just two figures."""
    meta = RunMeta(epsilon=1 / 15, overhead=0.6632, budgeted_seconds=4.9, compute_seconds=0.1)
    over = replace(meta, setup_seconds=3.19, bookkeeping_seconds=0.001)
    assert over.overhead_parts().endswith(
        "; over the budget because of flor's start-up, charged whole"
    )
    within = replace(meta, overhead=0.05)
    assert "over the budget" not in within.overhead_parts()


def test_a_fork_point_at_iteration_0_and_set_up_values_noted_as_none_survive_json() -> None:
    """Written only where they differ from their defaults: iteration 0 and an empty noting
    are not defaults, and must come back as written."""
    meta = RunMeta(parent="r1", forked_at=0, settings={}, trackers={"mlflow": []})
    back = RunMeta.from_json(meta.to_json())
    assert (back.parent, back.forked_at, back.settings, back.trackers) == (
        "r1",
        0,
        {},
        meta.trackers,
    )
    assert RunMeta.from_json(RunMeta().to_json()).settings is None  # older: not noted
