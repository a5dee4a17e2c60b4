"""Replay fidelity on the shapes real scripts take (PATTERNS.md section D).

Every case records a script, applies a hindsight edit, and compares each way of replaying it
(whole, every ``--segment i/3``, ``--workers 2``) with a plain full run of the edited script.
Replays of a print outside the block must also skip the training: counted in backward passes
(``tests/counting/sitecustomize.py``), not read from printed text.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, hindsight

from flor.errors import DIVERGED

pytestmark = pytest.mark.slow
FIDELITY = SCRIPTS / "fidelity"
DENSE, SPARSE = "1e9", "1e-9"  # every iteration checkpointed / only the first one
# Three `--segment`s of each shape would take 3 minutes of the suite's 30: the hand-annotated
# counters get them (and a `flor run` step loop in test_run_replay); every case runs
# `--workers 2`, which splits in segments too.
SEGMENTED_HAND = {("nanogpt_annotated.py", SPARSE)}


def backwards(f: Flor, tag: str, proc_args: tuple[str, ...], hand: bool = False, **env: str):
    return f.counting_backwards(tag, proc_args, hand, **env)


def write(f: Flor, source: Path, kind: str, name: str | None = None) -> Path:
    path = f.work / (name or source.name)
    path.write_text(hindsight(source.read_text(), kind))
    return path


def planned_reexecutions(plan: str) -> dict[str, str]:
    """``--plan``'s shown iterations whose block executes, and why (as a replay records)."""
    lines = [line.split() for line in plan.splitlines() if line.startswith("  iteration ")]
    return {
        words[1]: " ".join(words[5:]).strip("()")
        for words in lines
        if words[2] == "live" and words[4] == "execute"
    }


RUN_CASES = [  # (script, budget) recorded with `flor run`
    ("last_batch.py", DENSE),  # (1) a hindsight line reads `loss`, `logits` after the batch loop
    ("policy_lists.py", DENSE),  # (4) REINFORCE: lists on the policy, rollout then update
    ("model_optimizer.py", DENSE),  # (5) optimizer and rollout list held on the model
    ("lazy_env.py", DENSE),  # (6) an attribute the environment caches on first use
    ("dqn_steps.py", DENSE),  # step loop, replay buffer filled outside the update
    ("stateful_loader.py", DENSE),  # a persistent StatefulDataLoader iterator with workers
    ("loss_after_block.py", DENSE),  # the edit reads the forward's loss after the block
    ("best_state.py", DENSE),  # best weights copied outside the block, loaded after the loop
    ("word_lm.py", DENSE),  # an LSTM language model, its learning rate annealed by hand
]


# Segments (--workers 2) for the shapes whose state crosses a segment boundary differently:
# values read after the batch loop, lists on the policy, a replay buffer filled outside the
# update. The others' segments are the same mechanism (and the suite must stay under 30 min).
PARALLEL = {
    ("last_batch.py", DENSE),
    ("policy_lists.py", DENSE),
    ("dqn_steps.py", DENSE),
    ("stateful_loader.py", DENSE),  # a segment starts from the loader's recorded position
    ("best_state.py", DENSE),  # a segment starts with the best weights a full run had copied
}


@pytest.mark.parametrize(("name", "budget"), RUN_CASES, ids=[f"{n}-{b}" for n, b in RUN_CASES])
def test_flor_run_outside_edit_replays_like_a_full_run(
    flor_env: Flor, name: str, budget: str
) -> None:
    f = flor_env
    script = write(f, FIDELITY / name, "none")
    plain, full_backwards = backwards(f, "plain", (str(script),), hand=True)
    recorded = f.cli("run", "--name", "exp", name, FLOR_EPSILON=budget)
    assert recorded.stdout == plain.stdout
    write(f, FIDELITY / name, "outside")
    truth = f.truth(script)
    assert truth != plain.stdout, "the hindsight edit prints something new"

    planned = planned_reexecutions(f.cli("replay", "--name", "exp", "--plan").stdout)
    whole, replay_backwards = backwards(f, "whole", ("replay", "--name", "exp"))
    assert whole.stdout == truth
    assert "flor: replayed" in whole.stderr
    assert f.replays("exp")[-1].get("reexecuted", {}) == planned  # --plan said what it did
    if budget == DENSE:
        assert replay_backwards <= full_backwards / 4, (replay_backwards, full_backwards)
    if (name, budget) in PARALLEL:
        assert f.cli("replay", "--name", "exp", "--workers", "2").stdout == truth


HAND_CASES = [
    "nanogpt_annotated.py",  # (2) counters updated outside the block, not listed in end()
    "end_binds_loss.py",  # (3) end(model, optimizer, loss) at module level, loss bound in the block
    "end_binds_loss_fn.py",  # (3) the same inside a function, with two such names
]


@pytest.mark.parametrize(
    ("name", "budget"),
    [(name, DENSE) for name in HAND_CASES] + [("nanogpt_annotated.py", SPARSE)],
)
def test_hand_annotated_outside_edit_replays_like_a_full_run(
    flor_env: Flor, name: str, budget: str
) -> None:
    f = flor_env
    script = f.copy(name)
    plain, full_backwards = backwards(f, "plain", (str(script),), hand=True)
    assert f.python(script, "--flor", "exp", FLOR_EPSILON=budget).stdout == plain.stdout
    f.copy(name, "outside")
    truth = f.truth(script)
    whole, replay_backwards = backwards(
        f, "whole", (str(script), "--flor", "exp", "--replay_flor"), hand=True
    )
    assert whole.stdout == truth
    if budget == DENSE:
        assert replay_backwards <= full_backwards / 4, (replay_backwards, full_backwards)
    if (name, budget) in SEGMENTED_HAND:
        pieces = [
            f.python(script, "--flor", "exp", "--replay_flor", f"{i}/3").stdout for i in (1, 2, 3)
        ]
        assert "".join(pieces) == truth


def test_rollout_inside_edit_reexecutes_and_matches(flor_env: Flor) -> None:
    """A hindsight line inside the rollout: the block re-executes, and prints what a full run does."""
    f = flor_env
    script = write(f, FIDELITY / "policy_lists.py", "none")
    f.cli("run", "--name", "exp", "policy_lists.py", FLOR_EPSILON=DENSE)
    source = (
        (FIDELITY / "policy_lists.py")
        .read_text()
        .replace(
            "        policy.rewards.append(reward)\n",
            "        policy.rewards.append(reward)\n        print(f'  t {t} action {action}')\n",
        )
    )
    script.write_text(hindsight(source, "none"))
    truth = f.truth(script)
    assert f.cli("replay", "--name", "exp").stdout == truth
    assert f.replays("exp")[-1]["probed"] == ["module.L0"]


def test_a_segment_resumes_each_loaders_own_position(flor_env: Flor) -> None:
    """An edit inside the batch loop re-executes epochs 3-5 from the checkpoint of epoch 2. Their
    batches come in the order the loaders' own position decides: a generator only the loader
    holds, a sampler's epoch count. Before flor restored them, epoch 3 saw epoch 0's order."""
    f = flor_env
    script = write(f, FIDELITY / "loader_position.py", "none")
    f.cli("run", "--name", "exp", script.name, FLOR_EPSILON=DENSE)
    write(f, FIDELITY / "loader_position.py", "inside")
    truth = f.truth(script)
    out, replay_backwards = backwards(f, "second", ("replay", "--name", "exp", "--segment", "2/2"))
    assert "first batch" in truth and out.stdout == truth.split("epoch 2 loss")[1].split("\n", 1)[1]
    assert replay_backwards == 3 * 12  # epochs 3, 4 and 5: two loaders of 6 batches each


def test_nothing_instrumented_refuses_segments(flor_env: Flor) -> None:
    """(7) The loop lives in a file opted out of instrumentation: the run says it has no
    checkpoints; segments and workers are refused in one line; a whole replay runs the
    script once."""
    f = flor_env
    for source in (FIDELITY / "elsewhere").iterdir():
        write(f, source, "none")
    recorded = f.cli("run", "--name", "exp", "main.py")
    assert "has no checkpoints" in recorded.stderr
    write(f, FIDELITY / "elsewhere" / "main.py", "outside")
    truth = f.truth(f.work / "main.py")
    for extra in (["--segment", "2/3"], ["--workers", "2"]):
        refused = f.cli("replay", "--name", "exp", *extra, check=False)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.strip().splitlines()[-1].startswith("flor: error: run exp/")
        assert "Traceback" not in refused.stderr
    assert f.cli("replay", "--name", "exp").stdout == truth


def test_user_exception_in_replay_names_iteration_and_block(flor_env: Flor) -> None:
    f = flor_env
    script = write(f, FIDELITY / "last_batch.py", "none")
    f.cli("run", "--name", "exp", "last_batch.py", FLOR_EPSILON=DENSE)
    source = script.read_text().replace(
        '    print(f"epoch {epoch} acc {acc:.4f}")',
        '    print(f"epoch {epoch} acc {acc:.4f}")\n    assert epoch < 3, "hindsight check"',
    )
    script.write_text(source)
    failed = f.cli("replay", "--name", "exp", check=False)
    assert failed.returncode == 1
    assert "AssertionError: hindsight check" in failed.stderr
    assert (
        "\nflor: the error above happened replaying iteration 3, "
        "after block 'module.L0' was restored from its checkpoint\n" in failed.stderr
    )
    assert os.path.basename(str(script)) in failed.stderr


@pytest.mark.parametrize(
    ("args", "verdict"), [([], "all match the record"), (["--clock"], "DIFFER")]
)
def test_verify_catches_a_block_that_is_not_deterministic(
    flor_env: Flor, args: list[str], verdict: str
) -> None:
    f = flor_env
    write(f, FIDELITY / "private_generator.py", "none")
    f.cli("run", "--name", "exp", "private_generator.py", *args, FLOR_EPSILON=DENSE)
    write(f, FIDELITY / "private_generator.py", "outside")
    for workers in ([], ["--workers", "2"]) if args else ([],):
        checked = f.cli("replay", "--name", "exp", "--verify", "2", *workers, check=False)
        lines = checked.stderr.strip().splitlines()
        # the exit status says what the output cannot: it may not be a full run's
        assert checked.returncode == (DIVERGED if args else 0)
        assert ("ended in another state than the record's" in lines[-1]) == bool(args)
        if workers:  # their own summaries stay in the workers' stderr
            assert "segment 2/2: iteration" in lines[-1]
            continue
        summary = next(line for line in lines if "verified" in line)
        assert "verified 2 re-executed checkpointed blocks" in summary and verdict in summary
        assert ("re-executed to a state that differs from the record in" in checked.stderr) == (
            verdict == "DIFFER"
        )
    if not args:  # deterministic: what it prints is what a full run prints
        assert checked.stdout == f.truth(f.work / "private_generator.py")
