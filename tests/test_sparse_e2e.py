"""Sparse replay, end to end: a hindsight line under a loop test runs only where it holds.

Each replay is compared with a full run of the edited script, and the training it did is
counted in backward passes (``tests/counting``), not read from what it printed.
"""

from __future__ import annotations

import pytest
from conftest import Flor

pytestmark = pytest.mark.slow

SCRIPT = "sparse_steps.py"
EVAL_LINE = '        print(f"eval {iter_num}: {val:.5f}")\n'
LOG_LINE = '        print(f"log {iter_num}: loss {loss.item():.5f}")\n'
EDITS = {
    # beside the eval branch, which runs before the block: state at the start of the step
    "eval": (EVAL_LINE, EVAL_LINE + '        print(f"  w {model[0].weight.norm().item():.6f}")\n'),
    # beside the log branch, after the counter moved: state after the block
    "log": (LOG_LINE, LOG_LINE + '        print(f"  loss*2 {2 * loss.item():.6f}")\n'),
    # a new test of its own, on the loop's counter
    "new-test": (
        "    iter_num += 1\n",
        '    iter_num += 1\n    if iter_num % 9 == 4:\n        print(f"  b {model[2].bias.sum().item():.6f}")\n',
    ),
    # after the loop: only the end state is needed
    "after": ('print("done", iter_num)\n', 'print("done", iter_num, f"{loss.item():.6f}")\n'),
}
ITERATIONS = 40


def _edited(f: Flor, kind: str) -> str:
    source = (f.work / SCRIPT).read_text()
    old, new = EDITS[kind]
    assert old in source
    path = f.work / f"edited_{kind}.py"
    path.write_text(source.replace(old, new))
    return str(path)


def _record(f: Flor, epsilon: str) -> None:
    script = f.copy(SCRIPT)
    f.python(script, str(ITERATIONS), "--flor", "exp", FLOR_EPSILON=epsilon)


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_sparse_replay_prints_the_full_run_and_trains_only_where_needed(
    flor_env: Flor, kind: str
) -> None:
    f = flor_env
    _record(f, "1e9")  # a checkpoint every iteration: what is not needed is not run at all
    edited = _edited(f, kind)
    truth, full = f.counting_backwards("full", (edited, str(ITERATIONS)), hand=True)
    replay = (edited, str(ITERATIONS), "--flor", "exp", "--replay_flor")
    replayed, backward = f.counting_backwards("replay", replay, hand=True)
    assert replayed.stdout == truth.stdout
    assert full == ITERATIONS and backward == 0, "every needed block restored, none re-run"
    assert "not run, their recorded output printed" in replayed.stderr
    assert "warning" not in replayed.stderr


@pytest.mark.parametrize("kind", ["log"])
def test_sparse_replay_under_the_adaptive_budget(flor_env: Flor, kind: str) -> None:
    """Checkpoints are few; the periodic branches' eves are preferred (policy.py)."""
    f = flor_env
    _record(f, "")  # the default budget
    edited = _edited(f, kind)
    truth = f.truth(edited, str(ITERATIONS))
    replayed, backward = f.counting_backwards(
        "replay", (edited, str(ITERATIONS), "--flor", "exp", "--replay_flor"), hand=True
    )
    assert replayed.stdout == truth
    assert backward < ITERATIONS


def test_a_test_on_model_state_falls_back_to_every_iteration_and_says_so(flor_env: Flor) -> None:
    f = flor_env
    _record(f, "1e9")
    source = (
        (f.work / SCRIPT)
        .read_text()
        .replace(
            "    iter_num += 1\n",
            '    iter_num += 1\n    if loss.item() < 0.9:\n        print(f"  low {loss.item():.6f}")\n',
        )
    )
    edited = f.work / "edited_state.py"
    edited.write_text(source)
    truth = f.truth(edited, str(ITERATIONS))
    replayed = f.python(edited, str(ITERATIONS), "--flor", "exp", "--replay_flor")
    assert replayed.stdout == truth
    assert "replaying every iteration: line 34: `loss.item() < 0.9` calls loss.item()" in (
        replayed.stderr
    )
    assert "not run" not in replayed.stderr


def test_sparse_segments_merge_into_the_full_run(flor_env: Flor) -> None:
    f = flor_env
    script = f.copy(SCRIPT)
    f.cli("run", "--name", "exp", str(script), str(ITERATIONS))
    edited = _edited(f, "eval")
    truth = f.truth(edited, str(ITERATIONS))
    args = ("--workers", "2", "--threads", "auto", edited, str(ITERATIONS))
    merged = f.cli("replay", "--name", "exp", *args)
    assert merged.stdout == truth


def test_a_value_the_loop_never_assigns_keeps_this_processs_value(flor_env: Flor) -> None:
    """A value set before the loop (a timer, a label from the environment) is not rebound
    from a checkpoint: a full run of the edited script has its own."""
    f = flor_env
    script = f.copy(SCRIPT)
    f.python(script, str(ITERATIONS), "--flor", "exp", FLOR_EPSILON="1e9", RUN_LABEL="record")
    source = script.read_text().replace(EVAL_LINE, EVAL_LINE + '        print("  label", label)\n')
    edited = f.work / "edited_label.py"
    edited.write_text(source)
    truth = f.truth(edited, str(ITERATIONS), RUN_LABEL="replay")
    args = ("--flor", "exp", "--replay_flor")
    replayed = f.python(edited, str(ITERATIONS), *args, RUN_LABEL="replay")
    assert replayed.stdout == truth and "label replay" in truth


def test_a_storage_budget_thins_the_record_and_replay_still_matches(flor_env: Flor) -> None:
    """A checkpoint every iteration, a budget for about five: what stays are the eves of
    the eval branch and the newest; a hindsight line beside the eval branch still trains
    only the iterations it needs, and the store holds nothing the journal does not use."""
    f = flor_env
    script = f.copy(SCRIPT)
    f.python(
        script, str(ITERATIONS), "--flor", "exp", FLOR_EPSILON="1e9", FLOR_STORAGE="115KB"
    )  # five 21 KB checkpoints
    shown = f.cli("show", "exp").stdout
    assert "checkpoints  5 at iterations 9,19,29,38-39" in shown, shown
    assert "budget 115KB: kept 5 of 40 taken" in shown
    run = f.latest_run("exp")
    assert len(list((run / "ckpt").iterdir())) == 5
    edited = _edited(f, "eval")
    truth = f.truth(edited, str(ITERATIONS))
    replay = (edited, str(ITERATIONS), "--flor", "exp", "--replay_flor")
    replayed, backward = f.counting_backwards("replay", replay, hand=True)
    assert replayed.stdout == truth
    # Evals 0, 10, 20 and 30 start from the start and from kept checkpoints; each trains its
    # own step (the checkpoint after it was thinned), and none of the other 36 steps runs.
    assert backward == 4
