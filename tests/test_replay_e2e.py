"""Record a hand-annotated script, edit it, replay, and compare with a full run of the edit.

Ground truth is always a plain ``python edited.py`` run: replay must print
exactly what it prints, whole, or split into segments.
"""

from __future__ import annotations

import pytest
from conftest import SCRIPTS as SCRIPT_DIR
from conftest import Flor, Recordings

pytestmark = pytest.mark.slow

SCRIPTS = [
    ("module_loop.py", []),
    ("main_function.py", ["--epochs", "7"]),
    ("trainer_method.py", []),
    ("counters.py", []),
    ("unbounded_break.py", []),
    ("while_loop.py", []),
]
# every iteration checkpointed / only the first (replay must re-execute the rest)
BUDGETS = {"dense": "1e9", "sparse": "1e-9"}


def _record(f: Flor, recordings: Recordings, name: str, args: list[str], budget: str) -> None:
    """``name`` recorded as ``exp`` under ``budget`` (once per worker: tests share it)."""

    def record(template: Flor) -> None:
        original = template.copy(name)
        plain = template.truth(original, *args)
        recorded = template.python(original, "--flor", "exp", *args, FLOR_EPSILON=BUDGETS[budget])
        assert recorded.stdout == plain, "recording must not change what the script prints"
        assert "flor: recorded exp/" in recorded.stderr

    recordings.into(f, (name, *args, budget), record)


# Re-executing from the start (the sparse budget) is the same path for every shape: one of them
# (test_fidelity's nanoGPT counters, and segments below, take it too).
OUTSIDE = [(*s, "dense") for s in SCRIPTS] + [
    (*s, "sparse") for s in SCRIPTS if s[0] == "counters.py"
]


@pytest.mark.parametrize(
    ("name", "args", "budget"), OUTSIDE, ids=[f"{s[0]}-{s[2]}" for s in OUTSIDE]
)
def test_outside_edit_replays_like_full_run(
    flor_env: Flor, recordings: Recordings, name: str, args: list[str], budget: str
) -> None:
    f = flor_env
    _record(f, recordings, name, args, budget)
    edited = f.copy(name, "outside")
    truth = f.truth(edited, *args)
    replayed, backward = f.counting_backwards(
        "replay", (str(edited), "--flor", "exp", "--replay_flor", *args), hand=True
    )
    assert replayed.stdout == truth
    summary = replayed.stderr.splitlines()
    assert len(summary) == 1 and summary[0].startswith("flor: replayed "), replayed.stderr
    result = f.replays("exp")[-1]
    assert result["probed"] == []
    if budget == "dense":  # every block restored from its checkpoint: no training at all
        assert backward == 0


@pytest.mark.parametrize(("name", "args"), SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_inside_edit_reexecutes_block(
    flor_env: Flor, recordings: Recordings, name: str, args: list[str]
) -> None:
    f = flor_env
    _record(f, recordings, name, args, "dense")
    assert "# @inside:" in (SCRIPT_DIR / name).read_text(), "the case needs an inside edit"
    edited = f.copy(name, "inside")
    truth, full = f.counting_backwards("full", (str(edited), *args), hand=True)
    replayed, backward = f.counting_backwards(
        "replay", (str(edited), "--flor", "exp", "--replay_flor", *args), hand=True
    )
    assert replayed.stdout == truth.stdout
    assert f.replays("exp")[-1]["probed"]
    assert backward == full > 0, "the edited block re-executes in every iteration"


# Segments start on checkpoints (dense) or replay quietly from the start (sparse): three
# shapes once, which keeps the suite's time (both budgets of every shape take 4 minutes more).
SEGMENTED = [(*SCRIPTS[0], "dense"), (*SCRIPTS[1], "sparse"), (*SCRIPTS[2], "dense")]


@pytest.mark.parametrize(("name", "args", "budget"), SEGMENTED, ids=[s[0] for s in SEGMENTED])
def test_all_segments_print_every_iteration_once(
    flor_env: Flor, recordings: Recordings, name: str, args: list[str], budget: str
) -> None:
    f = flor_env
    _record(f, recordings, name, args, budget)
    edited = f.copy(name, "outside")
    truth = f.truth(edited, *args)
    n = 3
    outputs = [
        f.python(edited, "--flor", "exp", "--replay_flor", f"{i}/{n}", *args).stdout
        for i in range(1, n + 1)
    ]
    segments = sorted(f.replays("exp"), key=lambda r: r["segment"])
    covered = [i for s in segments for i in s["iterations"]]
    assert covered == sorted(set(covered)) and len(covered) > n, (
        "contiguous, disjoint, all iterations"
    )
    merged = segments[0]["output"].get("pre", "")
    for seg, printed in zip(segments, outputs):
        out = seg["output"]
        body = "".join(out.get(str(i), "") for i in seg["iterations"])
        expected = out.get("pre", "") + body + (out.get("post", "") if seg is segments[-1] else "")
        assert printed == expected, (
            f"segment {seg['segment']} printed something outside its iterations"
        )
        merged += body
    merged += segments[-1]["output"].get("post", "")
    assert merged == truth


def test_a_block_that_runs_faster_than_its_restore_is_run(flor_env: Flor) -> None:
    """Replay restores a checkpointed block only where that is faster than running it
    (``--restore auto``, the default): the updates here, not the steps between them, whose
    4 MB restore would take longer than their moment's work. ``always`` restores all."""
    f = flor_env
    f.python(f.copy("rare_updates.py"), "--flor", "exp", FLOR_EPSILON="1e9")
    edited = f.copy("rare_updates.py", "outside")
    truth, full = f.counting_backwards("full", (str(edited),), hand=True)
    replay = (str(edited), "--flor", "exp", "--replay_flor")
    auto, ran = f.counting_backwards("auto", replay, hand=True, FLOR_RESTORE="auto")
    always, ran_always = f.counting_backwards("always", replay, hand=True)
    assert auto.stdout == always.stdout == truth.stdout
    assert (full, ran_always) == (3 * 10 + 6, 0)
    # auto runs the 6 steps between updates, none of the updates (10 passes each); a loaded
    # host may stretch one step's recorded time past a restore's, which then restores it
    assert ran in (5, 6), "auto runs the steps between updates, and restores the updates"
