"""Training code in the project's other files (PATTERNS 33), through the real `flor` command.

Each project in tests/scripts/projects is copied, recorded with `flor run`, then edited
(hindsight lines marked `# @KIND:` in any of its files: outside the training in the entry
script, inside it in the other file, in a callback) and replayed. Ground truth is a plain
`python ENTRY` run of the edited project.
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import SCRIPTS, Flor, hindsight, pythonpath
from test_project_layouts import LAYOUTS

from flor.errors import DIVERGED

pytestmark = pytest.mark.slow
PROJECTS = SCRIPTS / "projects"
DENSE = "1e9"  # a checkpoint every iteration: replays restore, and segments start anywhere


def edit(f: Flor, project: str, kind: str) -> None:
    """The work dir holds ``project`` with the ``kind`` hindsight lines of all its files."""
    for path in (PROJECTS / project).rglob("*.py"):
        target = f.work / path.relative_to(PROJECTS / project)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(hindsight(path.read_text(), kind))


def probed(f: Flor) -> list[str]:
    return f.replays("exp")[-1]["probed"]


# project, entry script, the edits its files mark and whether each probes the block. The
# package trainer's inside edit is replayed by the `-m` test below, on the same project.
CASES = [
    ("engine_loop", "main.py", {"outside": False, "inside": True}),
    # The callback runs after the update (minGPT's on_batch_end): the recording saw no block
    # run it, so an edit to it restores the training (test_a_callback_... below).
    ("package_trainer", "train.py", {"outside": False, "callback": False}),
    ("algo_class", "main.py", {"outside": False, "inside": True}),
]


@pytest.mark.parametrize(("project", "entry", "kinds"), CASES, ids=[c[0] for c in CASES])
def test_project_records_and_replays_every_edit(
    flor_env: Flor, project: str, entry: str, kinds: dict[str, bool]
) -> None:
    f = flor_env
    edit(f, project, "none")
    recorded = f.cli("run", "--name", "exp", entry, FLOR_EPSILON=DENSE)
    if project == "package_trainer":  # rewritten by the import hook (the others: in place)
        assert recorded.stdout == f.truth(f.work / entry)
    truths = {}
    for kind, probes in kinds.items():
        edit(f, project, kind)
        truths[kind] = truth = f.truth(f.work / entry)
        assert truth != recorded.stdout, f"{kind}: the edit prints something"
        assert f.cli("replay", "--name", "exp").stdout == truth, kind
        assert bool(probed(f)) == probes, kind
        if probes and project != "package_trainer":  # (its segments: the `-m` test below)
            two = f.cli("replay", "--name", "exp", "--workers", "2")  # segments 1/2 and 2/2
            assert two.stdout == truth, f"{kind}: 2 workers"
            thirds = [f.cli("replay", "--name", "exp", "--segment", f"{i}/3") for i in (1, 2, 3)]
            assert "".join(s.stdout for s in thirds) == truth, f"{kind}: segments i/3"
    if project == "package_trainer":  # the last edit (the callback's) is in train.py
        shown = f.cli("show", "exp").stdout
        assert "mypkg/model.py, mypkg/trainer.py (rewritten)" in shown
        diff = f.cli("diff", "exp").stdout
        assert "mypkg/trainer.py (instrumented)" in diff and "train.py (now)" in diff
        assert "mypkg/trainer.py (now)" not in diff
    if project != "engine_loop":
        return
    # Edits the plan does not use change nothing: a project file the entry never imports
    # (nor does an edit after the call in main.py, above); inside the callee, one probes the
    # block, and is named where it changes training.
    edit(f, project, "outside")
    (f.work / "unused.py").write_text("def helper():\n    return 2\n")
    unused = f.cli("replay", "--name", "exp")
    assert unused.stdout == truths["outside"]
    assert probed(f) == [] and "unused.py" not in unused.stderr
    engine = f.work / "engine.py"  # grads are zeroed again before they are next used
    zeroed = "batches += 1\n        optimizer.zero_grad()"
    engine.write_text(engine.read_text().replace("batches += 1", zeroed))
    again = f.cli("replay", "--name", "exp", check=False)
    assert again.stdout == truths["outside"]
    assert probed(f) == ["module.L0"]
    assert "engine.py:25: this edit changes training itself: it calls .zero_grad" in again.stderr
    # Its blocks end with zeroed gradients, not the record's: flor cannot tell that harmless.
    assert again.returncode == DIVERGED and "block 'module.L0', in model" in again.stderr


def test_a_callback_edit_restores_the_training_unless_a_block_ran_it(flor_env: Flor) -> None:
    """minGPT's shape: the loop is in the package's Trainer, the callback in the entry script,
    handed over with ``set_callback``; where the trainer calls it, the source cannot tell.
    ``flor run`` notes it (``@flor.callback``): after the update it ran in no block, and an
    edit to it re-runs no training (counted in backward passes). A callback the trainer
    triggers inside the update is noted in its block: an edit to that one re-executes."""
    f = flor_env
    edit(f, "package_trainer", "none")
    entry = f.work / "train.py"
    _, full_backwards = f.counting_backwards("plain", (str(entry),), hand=True)
    recorded = f.cli("run", "--name", "exp", "train.py", FLOR_EPSILON=DENSE)
    assert (
        "train.py:14: batch_end_callback, handed to set_callback(): flor notes" in recorded.stderr
    )
    edit(f, "package_trainer", "callback")
    truth = f.truth(entry)
    replayed, replay_backwards = f.counting_backwards("whole", ("replay", "--name", "exp"))
    assert replayed.stdout == truth and probed(f) == []
    assert replay_backwards <= full_backwards / 4, (replay_backwards, full_backwards)

    trainer = f.work / "mypkg" / "trainer.py"  # a callback inside the update, and one edit
    inside = 'self.loss.backward()\n            self.trigger_callbacks("on_backward")'
    trainer.write_text(trainer.read_text().replace("self.loss.backward()", inside))
    grads = "def grads_callback(trainer):\n    trainer.norm = trainer.model.head.weight.grad.norm()\n\n\n"
    hook = 'trainer.set_callback("on_backward", grads_callback)\n'
    text = entry.read_text().replace("def batch_end_callback", grads + "def batch_end_callback")
    entry.write_text(text.replace("trainer.run()\n", hook + "trainer.run()\n"))
    f.cli("run", "--name", "exp", "train.py", FLOR_EPSILON=DENSE)
    edited = entry.read_text().replace(".norm()\n", ".norm()\n    print(f'{trainer.norm:.5f}')\n")
    entry.write_text(edited)
    assert f.cli("replay", "--name", "exp").stdout == f.truth(entry)
    assert probed(f) == ["mypkg.trainer.Trainer.run.L0"]


def test_a_module_in_a_package_replays_by_segment_and_with_dash_m(flor_env: Flor) -> None:
    """The package trainer run as `flor run -m mypkg.main` (relative imports from its package;
    replay runs it the same way): `flor run` says which file and line hold the loop and the
    block; an inside edit in mypkg/trainer.py is probed; segments partition the iterations
    and print what a full run does (`--workers` runs the same segments as processes)."""
    f = flor_env

    def as_module(kind: str) -> None:
        edit(f, "package_trainer", kind)
        entry = (f.work / "train.py").read_text()
        (f.work / "mypkg" / "main.py").write_text(entry.replace("from mypkg.", "from ."))

    as_module("none")
    recorded = f.cli("run", "--name", "exp", "-m", "mypkg.main", FLOR_EPSILON=DENSE)
    assert "mypkg/trainer.py:32: main loop `while True` in Trainer.run" in recorded.stderr
    assert "mypkg/trainer.py:33-40: block mypkg.trainer.Trainer.run.L0" in recorded.stderr
    run = f.latest_run("exp")
    listed = [e["path"] for e in json.loads((run / "project.json").read_text())["files"]]
    assert listed == ["mypkg/__init__.py", "mypkg/model.py", "mypkg/trainer.py"]
    as_module("inside")
    truth = f.python_m("mypkg.main").stdout
    assert f.cli("replay", "--name", "exp").stdout == truth
    assert probed(f) == ["mypkg.trainer.Trainer.run.L0"]
    segments = [f.cli("replay", "--name", "exp", "--segment", f"{i}/3") for i in (1, 2, 3)]
    covered = [it for seg in f.replays("exp")[-3:] for it in seg["iterations"]]
    assert sorted(covered) == list(range(30)) and len(covered) == 30
    assert "".join(s.stdout for s in segments) == truth
    assert f.cli("replay", "--name", "exp", "--workers", "2").stdout == truth
    missing = f.cli("run", "--name", "exp", "-m", "mypkg.nothing", check=False)
    assert missing.returncode == 2 and "no module mypkg.nothing" in missing.stderr


def test_instrument_prints_a_diff_per_file_and_writes_the_tree(flor_env: Flor) -> None:
    f = flor_env
    edit(f, "package_trainer", "none")
    shown = f.cli("instrument", "train.py")
    assert "+++ mypkg/trainer.py (instrumented)" in shown.stdout
    entry = shown.stdout.split("+++ train.py (instrumented)")[1].split("--- mypkg/")[0]
    added = [line for line in entry.splitlines() if line.startswith("+")]
    assert added == ["+import flor", '+@flor.callback("batch_end_callback")']  # its callback noted
    assert "mypkg/trainer.py:32: main loop" in shown.stderr
    refused = f.cli("instrument", "--write", "train.py", check=False)
    assert refused.returncode == 2 and "--all" in refused.stderr
    assert "flor" not in (f.work / "mypkg" / "trainer.py").read_text()
    f.cli("instrument", "-o", "out", "train.py")
    written = sorted(str(p.relative_to(f.work / "out")) for p in (f.work / "out").rglob("*.py"))
    assert written == ["mypkg/__init__.py", "mypkg/model.py", "mypkg/trainer.py", "train.py"]
    assert "flor.it(" in (f.work / "out" / "mypkg" / "trainer.py").read_text()
    shutil.rmtree(f.work / "out")
    f.cli("instrument", "--write", "--all", "train.py")
    assert "flor.it(" in (f.work / "mypkg" / "trainer.py").read_text()


# More layouts (test_project_layouts.LAYOUTS says how each starts, and finds their loops):
# for each edit its files mark, whether it probes the block.
MORE = {
    "train_util": {"outside": False, "inside": True},
    "star_import": {"inside": True},
    "runner_chain": {"outside": False, "inside": True},
    "nested_function": {"outside": False, "inside": True},
    "fitter_method": {"outside": False, "inside": True},
    "relative_subpkg": {"inside": True},
    "loader_workers": {"outside": False, "inside": True},
    "factory_trainer": {"outside": False, "inside": True},
}


@pytest.mark.parametrize("project", sorted(MORE))
def test_more_layouts_record_as_they_run_and_replay_every_edit(
    flor_env: Flor, project: str
) -> None:
    """The record prints what a plain run does; each edit's replay equals a full run of the
    edited project (a plain run, not memoized: the package may sit outside the entry's
    folder)."""
    f = flor_env
    entry, paths = LAYOUTS[project]
    env = pythonpath(*(f.work / p for p in paths))

    def plain() -> str:
        if entry[0] == "-m":
            return f.python_m(entry[1]).stdout
        return f.python(f.work / entry[0], **env).stdout

    edit(f, project, "none")
    recorded = f.cli("run", "--name", "exp", *entry, FLOR_EPSILON=DENSE, **env)
    assert recorded.stdout == plain()
    for kind, probes in MORE[project].items():
        edit(f, project, kind)
        truth = plain()
        assert truth != recorded.stdout, f"{kind}: the edit prints something"
        assert f.cli("replay", "--name", "exp", **env).stdout == truth, kind
        assert bool(probed(f)) == probes, kind
