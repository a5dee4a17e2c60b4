"""Forking a run at a checkpoint with a changed script: `flor run --from RUN@K`.

Ground truth is a plain script written by hand that trains to K with the recorded script's
learning rate and then sets the new one in ``param_groups``: the fork prints what it prints
after K and ends with every module in the same state, without running a backward pass of
iterations up to K (counted). A fork is a run of its own, with its parent and fork point in
`flor ls`, `flor show` and `flor.dataframe`, and replays like any other run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor
from test_recovery import HASHED, _run

from flor.runtime.state import settings

pytestmark = pytest.mark.slow

AT = 2  # the fork point: an epoch of epoch_inline.py (6 epochs of 10 backward passes)
LOOP = "for epoch in range(6):\n"
GRAD = '    print(f"  grad {model[0].weight.norm():.6f}")\n'  # a hindsight line, after the block


def _scripts(f: Flor) -> tuple[Path, str, Path]:
    """The recorded script, today's (its learning rate changed), and the hand-written truth."""
    recorded = (SCRIPTS / "plain/epoch_inline.py").read_text() + HASHED
    today = recorded.replace("lr=0.01", "lr=0.003")
    hand = recorded.replace(
        LOOP, LOOP + f'    if epoch == {AT + 1}:\n        optimizer.param_groups[0]["lr"] = 0.003\n'
    )
    script, truth = f.work / "train.py", f.work / "hand.py"
    script.write_text(recorded)
    truth.write_text(hand)
    return script, today, truth


def _after_fork(output: str) -> str:
    """A plain run's output as a fork prints it: the set-up's, then what follows epoch AT."""
    setup, _, rest = output.partition("\n")
    return setup + "\n" + rest.partition(f"epoch {AT} ")[2].partition("\n")[2]


def test_a_fork_with_a_new_learning_rate_trains_as_the_hand_written_script(
    flor_env: Flor,
) -> None:
    f = flor_env
    script, today, truth = _scripts(f)
    f.cli("run", "--name", "exp", script.name, FLOR_EPSILON="1e9")
    parent = f.latest_run("exp").name
    hand, _, hand_hashes = _run(f, "hand", (str(truth),), hand=True)
    script.write_text(today)

    fork, backwards, hashes = _run(
        f,
        "fork",
        ("run", "--name", "exp", "--from", f"latest@{AT}", script.name),
        FLOR_EPSILON="1e9",
    )
    assert fork.returncode == 0, fork.stderr
    assert backwards == (6 - AT - 1) * 10  # the epochs up to the fork point: restored, not run
    assert hashes == hand_hashes  # every module's final state, bit for bit
    assert fork.stdout == _after_fork(hand.stdout)
    assert f"forking exp/{parent} at iteration {AT}" in fork.stderr
    assert (
        "fork: today's set-up wins for optimizer: param_groups.0.lr 0.01 -> 0.003\n" in fork.stderr
    )

    child = f.latest_run("exp").name
    (line,) = [x for x in f.cli("ls").stdout.splitlines() if child in x]
    assert line.endswith(f"finished, forked from {parent}@{AT}")
    shown = f.cli("show", "exp").stdout
    assert f"forked from  exp/{parent} at iteration {AT}" in shown
    assert "fork set     optimizer: param_groups.0.lr=0.003" in shown

    # The fork replays like any other run: a hindsight line, whole or in two segments.
    edited = today.replace("    model.eval()\n", GRAD + "    model.eval()\n")
    script.write_text(edited)
    truth.write_text(truth.read_text().replace("    model.eval()\n", GRAD + "    model.eval()\n"))
    expected = _after_fork(f.python(truth).stdout)
    for workers in ("1", "2"):
        replayed = f.cli("replay", "--name", "exp", "--workers", workers)
        assert replayed.stdout == expected, workers


def test_the_dataframe_and_the_plot_follow_a_fork_s_lineage(flor_env: Flor) -> None:
    f = flor_env
    script = f.work / "train.py"
    source = (
        (SCRIPTS / "plain/epoch_inline.py")
        .read_text()
        .replace("    print(\n", "    flor.log('acc', acc)\n    print(\n")
    )
    script.write_text("import flor\n" + source)
    f.cli("run", "--name", "exp", script.name, FLOR_EPSILON="1e9")
    script.write_text("import flor\n" + source.replace("lr=0.01", "lr=0.05"))
    f.cli("run", "--name", "exp", "--from", f"latest@{AT}", script.name, FLOR_EPSILON="1e9")
    (f.work / "frame.py").write_text(
        "import json, flor\n"
        "from flor.runs.dataframe import logged_rows\n"
        "from flor.runs.plot import series_across\n"
        "from flor.runs import layout\n"
        "from flor.store import StoreSettings\n"
        "import os\n"
        "store = layout.open_store(None, StoreSettings.from_env(os.environ))\n"
        "rows = logged_rows(store, ('exp',))\n"
        "print(json.dumps({'rows': rows, 'series': series_across(rows, 'acc')}))\n"
    )
    out = json.loads(f.python(f.work / "frame.py").stdout)
    parent, child = sorted({r["run_id"] for r in out["rows"]})
    lineage = {(r["run_id"], r["parent"], r["forked_at"]) for r in out["rows"]}
    assert lineage == {(parent, None, None), (child, parent, AT)}
    assert sorted(r["iteration"] for r in out["rows"] if r["run_id"] == child) == [3, 4, 5]
    series = {label.split()[0]: points for label, points in out["series"].items()}
    assert [p[0] for p in series[child]] == [0, 1, 2, 3, 4, 5]  # its parent's line, then its own
    assert series[child][: AT + 1] == series[parent][: AT + 1]
    assert series[child][AT + 1 :] != series[parent][AT + 1 :]


def test_what_cannot_be_resumed_or_forked_is_one_line_and_changes_nothing(
    flor_env: Flor,
) -> None:
    f = flor_env
    script = f.work / "train.py"
    script.write_text((SCRIPTS / "plain/epoch_inline.py").read_text())
    f.cli("run", "--name", "exp", script.name, FLOR_EPSILON="1e9")
    f.cli("run", "--name", "exp", "--from", f"latest@{AT}", script.name, FLOR_EPSILON="1e9")
    parent, child = sorted(p.name for p in (f.home / "exp").iterdir())
    stored = sorted(str(p) for p in f.home.rglob("*"))
    cases = {
        ("--resume",): f"run exp/{child} of this script and arguments finished: nothing to resume",
        ("--from", "nope@3"): "run exp/nope not found",
        ("--from", "latest@9"): f"run exp/{child} ran 6 iterations: there is no iteration 9; "
        "the nearest checkpointed: 5",
        ("--from", "latest@1"): f"run exp/{child} went on from run {parent} at iteration {AT}",
        ("--from", "latest"): "--from 'latest': give RUN@ITERATION",
        ("--from", f"{parent}@1", "--resume"): "--resume and --from",
    }
    for flags, said in cases.items():
        done = f.cli("run", "--name", "exp", *flags, script.name, check=False)
        assert done.returncode == 2, (flags, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"flor: error: {said}"), (flags, line)
    assert sorted(str(p) for p in f.home.rglob("*")) == stored


def test_set_up_values_the_edit_changed_win_and_the_rest_come_from_the_checkpoint() -> None:
    setup = {"opt": {"param_groups.0.lr": 0.1, "param_groups.0.momentum": 0.9}, "s": {"gamma": 0.5}}
    today = {
        "opt": {"param_groups.0.lr": 0.05, "param_groups.0.momentum": 0.9},
        "s": {"gamma": 0.5},
    }
    at_fork = {
        "opt": {"param_groups.0.lr": 0.01, "param_groups.0.momentum": 0.9},
        "s": {"gamma": 0.5},
    }
    wins, said = settings.fork_settings(setup, today, at_fork)
    assert wins == {"opt": {"param_groups.0.lr": 0.05}}
    (line,) = said
    assert (
        line
        == "today's set-up wins for opt: param_groups.0.lr 0.1 -> 0.05 (0.01 at the fork point)"
    )
    # Unchanged by the edit: the checkpoint's (a scheduler's decay) carries on.
    assert settings.fork_settings(setup, setup, at_fork) == ({}, [])
    # Not noted by the parent: said, and the checkpoint's kept.
    wins, (line,) = settings.fork_settings(None, today, at_fork)
    assert wins == {} and "cannot tell" in line and "opt.param_groups.0.lr" in line


def test_settings_are_read_and_set_through_state_dicts() -> None:
    import torch

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1, betas=(0.8, 0.9))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    noted = settings.of({"model": model, "opt": opt, "sched": sched})
    assert "model" not in noted
    assert noted["opt"]["param_groups.0.betas.0"] == 0.8 and noted["sched"]["gamma"] == 0.5
    assert not any(leaf.startswith(("state", "param_groups.0.params")) for leaf in noted["opt"])
    settings.apply(
        {"opt": opt, "sched": sched},
        {
            "opt": {"param_groups.0.lr": 0.2, "param_groups.0.betas.1": 0.95},
            "sched": {"gamma": 0.1},
        },
    )
    assert opt.param_groups[0]["lr"] == 0.2 and opt.param_groups[0]["betas"] == (0.8, 0.95)
    assert sched.gamma == 0.1


def test_a_fork_may_change_the_training_block_itself(flor_env: Flor) -> None:
    """Gradient clipping added inside the training block from the fork point on: what a
    hand-written script that clips only after epoch AT prints."""
    f = flor_env
    source = (SCRIPTS / "plain/epoch_inline.py").read_text()
    script = f.work / "train.py"
    script.write_text(source)
    f.cli("run", "--name", "exp", script.name, FLOR_EPSILON="1e9")
    step = "        optimizer.step()\n"
    clip = "torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)\n"
    script.write_text(source.replace(step, "        " + clip + step))
    (f.work / "hand.py").write_text(
        source.replace(step, f"        if epoch > {AT}: " + clip + step)
    )
    fork, backwards = f.counting_backwards(
        "fork", ("run", "--name", "exp", "--from", f"latest@{AT}", script.name)
    )
    assert fork.stdout == _after_fork(f.python(f.work / "hand.py").stdout)
    assert backwards == (6 - AT - 1) * 10
