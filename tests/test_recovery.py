"""Resuming a run that did not finish: `flor run --resume` goes on from its last checkpoint.

Each shape is recorded until a SIGKILL right after one of its backward passes (chosen per
shape, 40-80% of the way), then the same command with `--resume` finishes it. Ground truth is
a plain run: what the resumed process prints after its set-up output ends the plain run's
output, its modules end in the same state (a line the script prints at its end hashes every
module alive), the backward passes before the resume point are not run again (counted), and
the run is one complete run that replays exactly.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor

pytestmark = pytest.mark.slow

SHAPES = [
    "plain/epoch_inline.py",  # an epoch loop, the batch loop inline
    "plain/while_true_steps.py",  # nanoGPT's `while True` step loop, broken out of
    "plain/trainer_class.py",  # the loop in a trainer class's method
    "plain/gan.py",  # two models, two optimizers
    "fidelity/dqn_steps.py",  # a step loop with a replay buffer filled outside the update
    "fidelity/loader_position.py",  # data-loader iterators that persist across epochs
    "plain/reinforce.py",  # an `itertools.count()` loop of episodes, ended by a break
]


# Appended to each shape: every module's state, hashed, once the script is done.
HASHED = """
import gc as _gc, hashlib as _hashlib, torch as _torch
print("modules", sorted(
    _hashlib.sha256(b"".join(v.detach().numpy().tobytes() for _, v in sorted(m.state_dict().items()))).hexdigest()[:12]
    for m in _gc.get_objects() if isinstance(m, _torch.nn.Module) and not list(m.children())
))
"""


def _shape(f: Flor, shape: str, source: str | None = None) -> Path:
    """The shape's script in the work dir, ending with the line that hashes its modules."""
    script = f.work / shape.split("/")[1]
    text = (SCRIPTS / shape).read_text() if source is None else source
    text = text.replace(
        "    Trainer(epochs=6).fit()", "    trainer = Trainer(epochs=6)\n    trainer.fit()"
    )
    script.write_text(text + HASHED)
    return script


def _run(f: Flor, tag: str, args: tuple[str, ...], hand: bool = False, **env: str):
    proc, backwards = f.counting_backwards(tag, args, hand, check=False, **env)
    hashed = [line for line in proc.stdout.splitlines() if line.startswith("modules [")]
    return proc, backwards, hashed[0] if hashed else None


def _after_setup(resumed: str, plain: str) -> str:
    """What the resumed process printed once its set-up output (the plain run's start)
    ended."""
    common = 0
    while common < min(len(resumed), len(plain)) and resumed[common] == plain[common]:
        common += 1
    start = resumed.rfind("\n", 0, common) + 1  # back to a whole line
    return resumed[start:]


def killed_twice(
    f: Flor, command: tuple[str, ...], total: int, between: Callable[[], object] = lambda: None
) -> None:
    """``command`` killed a third and two thirds of the way (``total`` backward passes); the
    second kill comes in the resumed part, which counts its own passes. ``between`` runs
    after each kill."""
    for tag, kill_at in (("first", total // 3), ("second", 2 * total // 3)):
        killed, _, _ = _run(f, tag, command, FLOR_EPSILON="1e9", KILL_AT_BACKWARD=str(kill_at))
        assert killed.returncode == -9
        between()


@pytest.mark.parametrize("shape", SHAPES)
def test_a_killed_run_resumes_to_what_an_uninterrupted_run_gives(
    flor_env: Flor, shape: str
) -> None:
    f = flor_env
    script = _shape(f, shape)
    plain, total, plain_hashes = _run(f, "plain", (str(script),), hand=True)
    assert plain.returncode == 0 and plain_hashes
    kill_at = int(total * random.Random(shape).uniform(0.4, 0.8))
    command = ("run", "--name", "exp", "--resume", script.name)
    killed, _, _ = _run(f, "killed", command, FLOR_EPSILON="1e9", KILL_AT_BACKWARD=str(kill_at))
    assert killed.returncode == -9, killed.stderr
    assert "no run of exp with this script and arguments yet" in killed.stderr

    resumed, backwards, hashes = _run(f, "resumed", command, FLOR_EPSILON="1e9")
    assert resumed.returncode == 0, resumed.stderr
    at = int(re.search(r"from its checkpoint at iteration (\d+)", resumed.stderr).group(1))
    tail = _after_setup(resumed.stdout, plain.stdout)
    assert tail and plain.stdout.endswith(tail)
    assert hashes == plain_hashes  # every module's final state, bit for bit
    iterations = int(re.search(r"iterations +(\d+)", f.cli("show", "exp").stdout).group(1))
    if total % iterations == 0:  # as many passes in every iteration: those up to `at` skipped
        assert backwards == total - (at + 1) * total // iterations, (backwards, total, at)
    else:  # a step loop updating now and then: fewer than all (what the skipped steps did)
        assert backwards < total, (backwards, total, at)

    (run,) = [line for line in f.cli("ls").stdout.splitlines() if line.startswith("exp ")]
    assert "finished" in run and "resumed 1x" in run
    assert f"resumed      at iteration {at + 1}" in f.cli("show", "exp").stdout
    assert f.cli("replay", "--name", "exp").stdout == plain.stdout


def test_a_second_kill_and_a_crash_fixed_resume_the_same_run(flor_env: Flor) -> None:
    """Killed twice, then finished: one run, resumed twice. A run whose script raised,
    resumed once the bug is fixed (an edit that leaves training alone)."""
    f = flor_env
    source = (SCRIPTS / "plain/epoch_inline.py").read_text()
    script = _shape(f, "plain/epoch_inline.py")
    plain, total, plain_hashes = _run(f, "plain", (str(script),), hand=True)
    command = ("run", "--name", "exp", "--resume", script.name)
    killed_twice(f, command, total)
    resumed, _, hashes = _run(f, "third", command, FLOR_EPSILON="1e9")
    assert resumed.returncode == 0 and hashes == plain_hashes
    assert len(f.cli("ls").stdout.splitlines()) == 2  # the header, one run
    assert "resumed 2x" in f.cli("ls").stdout

    bug = source.replace("    model.eval()\n", "    model.eval()\n    assert epoch != 3, 'bug'\n")
    _shape(f, "plain/epoch_inline.py", bug)
    crashed = f.cli("run", "--name", "bug", "--resume", script.name, check=False)
    assert crashed.returncode == 1 and "AssertionError: bug" in crashed.stderr
    _shape(f, "plain/epoch_inline.py", source)  # fixed
    fixed, _, hashes = _run(f, "fixed", ("run", "--name", "bug", "--resume", script.name))
    assert fixed.returncode == 0 and hashes == plain_hashes
    assert plain.stdout.endswith(_after_setup(fixed.stdout, plain.stdout))


def test_an_edit_to_the_training_is_refused_and_nothing_changes(flor_env: Flor) -> None:
    f = flor_env
    script = f.work / "epoch_inline.py"
    source = (SCRIPTS / "plain/epoch_inline.py").read_text()
    script.write_text(source)
    command = ("run", "--name", "exp", "--resume", script.name)
    f.counting_backwards("killed", command, check=False, KILL_AT_BACKWARD="25")
    before = sorted(p.name for p in f.latest_run("exp").rglob("*"))
    script.write_text(source.replace("optimizer.step()", "optimizer.step()\n        total += 0"))
    refused = f.cli(*command, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].startswith("flor: error: the script changed")
    assert sorted(p.name for p in f.latest_run("exp").rglob("*")) == before


def test_a_hand_annotated_run_resumes_with_flor_resume(flor_env: Flor) -> None:
    """`python train.py --flor NAME` with FLOR_RESUME=1: the same as `flor run --resume`."""
    f = flor_env
    source = (SCRIPTS / "trainer_method.py").read_text()
    source = source.replace("    Trainer().fit(6)", "    trainer = Trainer()\n    trainer.fit(6)")
    script = f.work / "trainer_method.py"
    script.write_text(source + HASHED)
    plain, total, plain_hashes = _run(f, "plain", (str(script),), hand=True)
    args = (str(script), "--flor", "hand")
    env = {"FLOR_RESUME": "1", "FLOR_EPSILON": "1e9"}
    killed, _, _ = _run(f, "killed", args, hand=True, KILL_AT_BACKWARD=str(total // 2), **env)
    assert killed.returncode == -9
    resumed, backwards, hashes = _run(f, "resumed", args, hand=True, **env)
    assert resumed.returncode == 0 and hashes == plain_hashes, resumed.stderr
    assert "resuming hand/" in resumed.stderr and backwards < total
    assert plain.stdout.endswith(_after_setup(resumed.stdout, plain.stdout))
    assert "resumed 1x" in f.cli("ls").stdout


@pytest.mark.xdist_group("torchrun")  # one torchrun job at a time (test_distributed.py)
def test_a_torchrun_job_resumes_under_torchrun_with_as_many_processes(flor_env: Flor) -> None:
    """A DDP job whose rank 1 is killed at the start of epoch 3 resumes under torchrun with
    the same world size: every rank replays up to the checkpoint all of them committed and
    records its own journal on; another world size is refused in one line."""
    f = flor_env
    script = f.copy("distributed/ddp_train.py", as_name="ddp_train.py")
    plain = f.torchrun_truth(script)
    command = ("run", "--name", "ddp", "--resume", script.name)
    killed = f.torchrun("-m", "flor.cli", *command, check=False, FLOR_EPSILON="1e9", KILL_RANK="1")
    assert killed.returncode != 0

    alone = f.cli(*command, check=False)
    assert alone.returncode == 2 and alone.stderr.strip().splitlines()[-1].endswith(
        "ran on 2 processes (torchrun), this job has 1: resume it with torchrun --nproc_per_node 2"
    )
    resumed, backwards = f.counting_backwards("resumed", command, torchrun=True, FLOR_EPSILON="1e9")
    at = int(re.search(r"from its checkpoint at iteration (\d+)", resumed.stderr).group(1))
    assert resumed.stderr.count("resuming ddp/") == 1  # said once for the job
    assert resumed.stdout == "".join(plain.splitlines(keepends=True)[at + 1 :])
    assert backwards == (6 - at - 1) * 2 * 6  # 6 batches per rank and epoch, after `at` only
    (run,) = [line for line in f.cli("ls").stdout.splitlines() if line.startswith("ddp ")]
    assert "finished, resumed 1x" in run
    f.copy("distributed/ddp_train.py", "outside", as_name="ddp_train.py")
    outside = f.torchrun_truth(f.copy("distributed/ddp_train.py", "outside", as_name="truth.py"))
    assert f.cli("replay", "--name", "ddp").stdout == outside  # one process, every epoch restored


def test_flor_resume_names_the_run_and_finds_its_script_and_arguments(flor_env: Flor) -> None:
    """`flor resume --name NAME [--run ID]`, from any directory: the run's own script and
    arguments, in the directory it started in. What it cannot resume: one line, exit 2."""
    f = flor_env
    script = _shape(f, "plain/epoch_inline.py")
    plain, total, plain_hashes = _run(f, "plain", (str(script),), hand=True)
    command = ("run", "--name", "exp", script.name)
    killed, _, _ = _run(f, "killed", command, FLOR_EPSILON="1e9", KILL_AT_BACKWARD=str(total // 2))
    assert killed.returncode == -9
    killed_id = f.latest_run("exp").name
    f.cli(*command)  # a newer run, finished: the newest unfinished one is still the killed one
    elsewhere = f.work / "elsewhere"
    elsewhere.mkdir()
    f.work, home = elsewhere, f.work
    resumed, backwards, hashes = _run(f, "resumed", ("resume", "--name", "exp"))
    f.work = home
    assert resumed.returncode == 0 and hashes == plain_hashes, resumed.stderr
    assert f"resuming exp/{killed_id}" in resumed.stderr and backwards < total
    assert plain.stdout.endswith(_after_setup(resumed.stdout, plain.stdout))

    stored = sorted(str(p) for p in f.home.rglob("*"))
    for args, said in (
        (("--name", "exp"), "every run of exp finished: nothing to resume"),
        (("--name", "exp", "--run", killed_id), f"run exp/{killed_id} finished: nothing to"),
        (("--name", "exp", "--run", "nope"), "run exp/nope not found"),
        (("--name", "other"), "no recorded run named 'other'"),
    ):
        done = f.cli("resume", *args, check=False)
        assert done.returncode == 2 and done.stderr.startswith(f"flor: error: {said}"), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert sorted(str(p) for p in f.home.rglob("*")) == stored
