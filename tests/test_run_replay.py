"""`flor run` / `flor replay` on unmodified scripts, through the real command.

Ground truth is always a plain `python edited.py` run of the edited script.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, hindsight

pytestmark = pytest.mark.slow
PLAIN = SCRIPTS / "plain"
REALISTIC = [
    ("train_function.py", ["--epochs", "6"]),
    ("trainer_class.py", []),
    ("while_true_steps.py", []),
    ("reinforce.py", []),
    ("module_globals.py", []),
]
# `--segment` and `--workers 2` of an outside edit are covered for three more shapes by
# test_fidelity (the rollout among them): here workers run once per script (on the probed
# block where there is one), and segments for the step loop, which keeps the suite under 30
# minutes.
SEGMENTED = {"while_true_steps.py"}


def write(f: Flor, name: str, kind: str) -> Path:
    path = f.work / name
    path.write_text(hindsight((PLAIN / name).read_text(), kind))
    return path


@pytest.mark.parametrize(("name", "args"), REALISTIC, ids=[n for n, _ in REALISTIC])
def test_run_then_replay_whole_parallel_and_by_segment(
    flor_env: Flor, name: str, args: list[str]
) -> None:
    f = flor_env
    script = write(f, name, "none")
    plain = f.truth(script, *args)
    recorded = f.cli("run", "--name", "exp", name, *args)
    assert recorded.stdout == plain
    markers = (PLAIN / name).read_text()
    parallel = "inside" if "# @inside:" in markers else "outside"  # the probed block, if any
    truths = {}
    for kind in ("outside", "inside"):
        if f"# @{kind}:" not in markers:
            continue
        write(f, name, kind)
        truths[kind] = truth = f.truth(script, *args)
        assert f.cli("replay", "--name", "exp").stdout == truth, f"{kind}: 1 worker"
        if kind == parallel:
            two = f.cli("replay", "--name", "exp", "--workers", "2").stdout
            assert two == truth, f"{kind}: 2 workers"
    if name not in SEGMENTED:
        return
    write(f, name, "outside")
    truth = truths["outside"]
    pieces = [f.cli("replay", "--name", "exp", "--segment", f"{i}/3").stdout for i in (1, 2, 3)]
    segments = sorted(
        (r for r in f.replays("exp") if r["segment"][1] == 3), key=lambda r: r["segment"]
    )
    assert [r["segment"][0] for r in segments] == [1, 2, 3]
    merged = segments[0]["output"].get("pre", "")
    for seg, printed in zip(segments, pieces):
        body = "".join(seg["output"].get(str(i), "") for i in seg["iterations"])
        tail = seg["output"].get("post", "") if seg is segments[-1] else ""
        assert printed == seg["output"].get("pre", "") + body + tail
        merged += body
    assert merged + segments[-1]["output"].get("post", "") == truth


def test_run_is_faithful_to_python(flor_env: Flor) -> None:
    f = flor_env
    (f.work / "helper.py").write_text("VALUE = 41\n")
    script = f.work / "faithful.py"
    script.write_text(
        "import os, sys\nimport helper\nimport torch\n"
        "print(sys.argv[1:], os.path.basename(__file__), __name__, helper.VALUE + 1, os.getcwd() == sys.argv[1])\n"
        "w = torch.nn.Parameter(torch.zeros(2))\nopt = torch.optim.SGD([w], lr=0.1)\n"
        "for i in range(3):\n    (w - 1).pow(2).sum().backward()\n    opt.step()\n    opt.zero_grad()\n"
        "    print(i, w.tolist())\n"
        "sys.exit(int(sys.argv[2]))\n"
    )
    plain = f.python(script, str(f.work), "3", "--flag=x", check=False)
    run = f.cli("run", "--name", "faith", "faithful.py", str(f.work), "3", "--flag=x", check=False)
    assert plain.returncode == run.returncode == 3
    assert run.stdout == plain.stdout
    assert "['" + str(f.work) + "', '3', '--flag=x'] faithful.py __main__ 42 True" in run.stdout
    replayed = f.cli("replay", "--name", "faith", check=False)
    assert replayed.returncode == 3 and replayed.stdout == plain.stdout


def test_tracebacks_point_at_the_original_lines(flor_env: Flor) -> None:
    f = flor_env
    script = f.work / "boom.py"
    script.write_text(
        "import torch\nm = torch.nn.Linear(1, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for epoch in range(3):\n    for x in [torch.ones(1)]:\n        m(x).sum().backward()\n        opt.step()\n"
        "    if epoch == 1:\n        raise ValueError('user bug')\n"
    )
    plain = f.python(script, check=False)
    run = f.cli("run", "--name", "boom", "boom.py", check=False)
    assert run.returncode == plain.returncode == 1
    assert (
        'boom.py", line 9, in <module>' in run.stderr
        and "raise ValueError('user bug')" in run.stderr
    )
    after = run.stderr.split("ValueError: user bug\n")[1]  # then flor's one line on the failure
    assert after.startswith("flor: run boom/") and after.count("\n") == 1
    assert "flor/runtime" not in run.stderr.split("Traceback", 1)[1], "flor's frames are trimmed"


def test_unparsable_script_runs_unmodified_like_python(flor_env: Flor) -> None:
    f = flor_env
    script = f.work / "broken.py"
    script.write_text("print('before')\nfor x in range(3)\n    pass\n")
    plain = f.python(script, check=False)
    run = f.cli("run", "--name", "broken", "broken.py", check=False)
    assert run.returncode == plain.returncode == 1
    assert "flor: warning: broken.py:2:" in run.stderr and "running it unmodified" in run.stderr
    assert run.stderr.strip().endswith(plain.stderr.strip().splitlines()[-1])  # SyntaxError: ...


def test_replay_errors_are_one_line(flor_env: Flor) -> None:
    f = flor_env
    script = write(f, "while_condition.py", "none")
    f.cli("run", "--name", "exp", "while_condition.py")
    cases = [
        (["replay", "--name", "nosuch"], "no recorded run named 'nosuch'"),
        (["replay", "--name", "exp", "--segment", "3/2"], "outside 1..2"),
        (["replay", "--name", "exp", "--segment", "x"], "not of the form I/N"),
        (["replay", "--name", "exp", "missing.py"], "cannot read missing.py"),
        (["replay", "--name", "exp", "--run", "nope"], "run exp/nope not found"),
        (["replay", "--name", "exp", "--iterations", "99"], "outside the record's 0-9"),
        (["replay", "--name", "exp", "--workers", "2", "--segment", "1/2"], "pick one"),
        (["run", "--name", "bad/name", "while_condition.py"], "run name"),
    ]
    for args, message in cases:
        proc = f.cli(*args, check=False)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (args, proc.stderr)
        assert lines[-1].startswith("flor: error: ") and message in lines[-1], (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    # The parent of a parallel replay rewrites the edit while its workers start: an edit it
    # refuses stops them, and is said once.
    script.write_text(script.read_text() + "print(\n")
    proc = f.cli("replay", "--name", "exp", "--workers", "2", check=False)
    assert proc.returncode == 2 and proc.stderr.count("flor: error: ") == 1
    assert "cannot parse" in proc.stderr.strip().splitlines()[-1] and "segment" not in proc.stderr


def test_changed_block_structure_is_refused(flor_env: Flor) -> None:
    f = flor_env
    script = write(f, "train_function.py", "none")
    f.cli("run", "--name", "exp", "train_function.py", "--epochs", "2")
    moved = (
        script.read_text()
        .replace("def main():", "def main_renamed():")
        .replace("    main()", "    main_renamed()")
    )
    script.write_text(moved)
    proc = f.cli("replay", "--name", "exp", check=False)
    assert proc.returncode == 2 and "SkipBlocks no longer match the record" in proc.stderr
    assert "missing now: main.L0" in proc.stderr


def test_training_edits_are_reported(flor_env: Flor) -> None:
    f = flor_env
    script = write(f, "while_condition.py", "none")
    f.cli("run", "--name", "exp", "while_condition.py")
    script.write_text(
        script.read_text().replace("    step += 1\n", "    step += 1\n    print(torch.rand(1))\n")
    )
    proc = f.cli("replay", "--name", "exp", check=False)
    assert "changes training itself" in proc.stderr and "torch.rand" in proc.stderr


def test_plan_iterations_and_looking_at_runs(flor_env: Flor) -> None:
    f = flor_env
    plain = f.truth(write(f, "while_condition.py", "none"))
    recorded = f.cli("run", "--name", "exp", "while_condition.py", FLOR_EPSILON="1e9")
    plan = f.cli("replay", "--name", "exp", "--plan").stdout
    # nothing edited: the last iteration runs (from the checkpoint before it, for the code
    # after the loop), the other eight print their recorded output
    assert "10 iterations recorded" in plan and plan.count("block restore") == 2
    assert "8 more not run: their recorded output is printed" in plan
    assert "estimate" in plan
    script = write(f, "while_condition.py", "outside")
    truth_lines = f.truth(script).splitlines(keepends=True)
    chosen = f.cli("replay", "--name", "exp", "--iterations", "4").stdout
    assert chosen == "".join(truth_lines[8:10]), "iteration 4 alone: its two lines"
    assert f.cli("replay", "--name", "exp", FLOR_ITERATIONS="4").stdout == chosen
    run_dir = f.latest_run("exp")
    meta = json.loads((run_dir / "run.json").read_text())
    assert (
        meta["argv"] == ["while_condition.py"] and meta["exit_status"] == 0 and meta["instrumented"]
    )
    assert (run_dir / "original.py").read_text() == hindsight(
        (PLAIN / "while_condition.py").read_text(), "none"
    )
    assert sorted(p.name for p in (run_dir / "replays").iterdir()), (
        "replays are stored beside the run"
    )
    shown = f.cli("show", "exp").stdout
    assert "checkpoints  10 at iterations 0-9" in shown
    diff = f.cli("diff", "exp").stdout
    assert "+for _flor_step in flor.it(lambda: step < max_steps):" in diff
    assert "(now)" in diff and "+    print(" in diff
    assert recorded.stdout == plain, "recording prints what python prints"


def test_gc_frees_bytes_and_keeps_what_it_should(flor_env: Flor) -> None:
    f = flor_env
    write(f, "while_condition.py", "none")
    for _ in range(3):
        f.cli("run", "--name", "exp", "while_condition.py", FLOR_EPSILON="1e9")
    runs_before = sorted(p.name for p in (f.home / "exp").iterdir())
    dry = f.cli("gc", "--keep", "1", "--dry-run").stdout
    assert "would free" in dry and "from 2 runs" in dry
    assert sorted(p.name for p in (f.home / "exp").iterdir()) == runs_before
    out = f.cli("gc", "--keep", "2", "--checkpoints-only").stdout
    assert "freed" in out and "from checkpoints of 1 runs" in out
    oldest = f.home / "exp" / runs_before[0]
    assert not list(oldest.glob("ckpt/*")) and (oldest / "run.json").exists()
    script = write(f, "while_condition.py", "outside")
    truth = f.truth(script)
    assert f.cli("replay", "--name", "exp", "--run", runs_before[0]).stdout == truth, (
        "re-executed, not restored"
    )
    f.cli("gc", "--keep", "1")
    assert sorted(p.name for p in (f.home / "exp").iterdir()) == runs_before[-1:]
    assert f.cli("gc", check=False).returncode == 2


def test_dataframe_and_plot(flor_env: Flor, tmp_path: Path) -> None:
    f = flor_env
    script = f.copy("while_loop.py")
    f.python(script, "--flor", "exp", FLOR_EPSILON="1e9")
    import flor as flor_module

    frame = flor_module.dataframe("exp", home=str(f.home))
    assert list(frame.columns) == [
        "experiment",
        "run_id",
        "version",
        "source",
        "replay_id",
        "iteration",
        "step",
        "name",
        "value",
        "parent",
        "forked_at",
    ]
    assert len(frame[frame.name == "loss"]) == 9
    png = tmp_path / "loss.png"
    out = f.cli("logs", "exp", "--plot", "loss", "-o", str(png))
    assert out.stdout.strip() == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f.cli("logs", "exp", "--plot", "nothing", check=False).returncode == 2


def test_plan_and_replay_say_alike_which_blocks_run_and_why(flor_env: Flor) -> None:
    """One rule (``flor.replay.decide``) decides for the replay and for ``--plan``: the
    iterations the plan says execute are the ones the replay re-executed, for the same reason,
    which the summary line counts and the replay's record keeps per iteration."""
    f = flor_env
    script = f.work / "last_batch.py"
    script.write_text(hindsight((SCRIPTS / "fidelity" / "last_batch.py").read_text(), "none"))
    f.cli("run", "--name", "exp", script.name, FLOR_EPSILON="1e-9")  # one checkpoint: the first
    script.write_text(hindsight((SCRIPTS / "fidelity" / "last_batch.py").read_text(), "outside"))
    plan = f.cli("replay", "--name", "exp", "--plan").stdout
    planned = {
        int(line.split()[1]): line.split("execute (")[1].rstrip(")")
        for line in plan.splitlines()
        if "block execute" in line
    }
    assert planned == dict.fromkeys(range(1, 6), "without a checkpoint")
    replayed = f.cli("replay", "--name", "exp")
    assert replayed.stdout == f.truth(script)
    assert "1 restored" in replayed.stderr and "5 re-executed" in replayed.stderr
    assert "(5 without a checkpoint)" in replayed.stderr
    assert f.replays("exp")[-1]["reexecuted"] == {str(g): why for g, why in planned.items()}


LOGS_TO_STDERR = """
import logging, sys
import torch
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
log = logging.getLogger("train")
torch.manual_seed(0)
X = torch.randn(64, 4); y = (X.sum(1) > 0).long()
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log.info("starting")
for epoch in range(4):
    for i in range(0, 64, 16):
        loss = torch.nn.functional.cross_entropy(model(X[i:i+16]), y[i:i+16])
        opt.zero_grad(); loss.backward(); opt.step()
        if i == 32:
            log.info(f"epoch {epoch} batch {i} loss {loss.item():.4f}")
            print(f"raw stderr {epoch}", file=sys.stderr)
    print(f"epoch {epoch} loss {loss.item():.4f}")
    log.warning(f"epoch {epoch} done")
log.info("finished")
"""


@pytest.mark.parametrize(
    ("edit", "restore"),
    [
        ('    print("norm", round(model.weight.norm().item(), 4))\n', "always"),
        ('    if epoch == 2: print("norm", round(model.weight.norm().item(), 4))\n', "always"),
    ],
    ids=["restored", "echoed"],
)
def test_what_restored_blocks_logged_to_stderr_is_replayed(
    flor_env: Flor, edit: str, restore: str
) -> None:
    """Lines a block wrote through `logging` and to stderr, replayed in order where the block
    is restored (or its whole iteration echoed): the replay's stderr is a plain run's, flor's
    own lines aside."""
    f = flor_env
    script = f.work / "logs.py"
    script.write_text(LOGS_TO_STDERR)
    f.cli("run", "--name", "logs", "logs.py", FLOR_EPSILON="1e9")
    script.write_text(
        LOGS_TO_STDERR.replace(
            '    print(f"epoch {epoch} loss', edit + '    print(f"epoch {epoch} loss'
        )
    )
    plain = f.python(script)
    replayed, backwards = f.counting_backwards(
        "r", ("replay", "--name", "logs", "--restore", restore)
    )
    assert replayed.stdout == plain.stdout
    ours = [line for line in replayed.stderr.splitlines() if not line.startswith("flor: ")]
    assert ours == plain.stderr.splitlines() and "raw stderr 3" in ours
    assert backwards <= 4  # restored or echoed, not re-trained (one iteration's 4 at most)
    # Two workers: their stderr merged as their stdout is, each line once and in order.
    split = f.cli("replay", "--name", "logs", "--restore", restore, "--workers", "2")
    assert split.stdout == plain.stdout
    ours = [line for line in split.stderr.splitlines() if not line.startswith("flor: ")]
    assert ours == plain.stderr.splitlines()
