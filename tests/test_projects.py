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
from conftest import SCRIPTS, Flor, hindsight

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


# project, entry script, the kinds of edit its files mark, which of them probe the block
CASES = [
    ("engine_loop", "main.py", {"outside": False, "inside": True}),
    ("package_trainer", "train.py", {"outside": False, "inside": True, "callback": True}),
    ("algo_class", "main.py", {"outside": False, "inside": True}),
]


@pytest.mark.parametrize(("project", "entry", "kinds"), CASES, ids=[c[0] for c in CASES])
def test_project_records_and_replays_every_edit(
    flor_env: Flor, project: str, entry: str, kinds: dict[str, bool]
) -> None:
    f = flor_env
    edit(f, project, "none")
    plain = f.python(f.work / entry).stdout
    recorded = f.cli("run", "--name", "exp", entry, FLOR_EPSILON=DENSE)
    assert recorded.stdout == plain
    for kind, probes in kinds.items():
        edit(f, project, kind)
        truth = f.python(f.work / entry).stdout
        assert truth != plain, f"{kind}: the edit prints something"
        assert f.cli("replay", "--name", "exp").stdout == truth, kind
        assert bool(probed(f)) == probes, kind


def test_main_loop_in_another_file_is_named_and_replays_by_segment(flor_env: Flor) -> None:
    """The package trainer: `flor run` says which file and line hold the loop and the block;
    segments partition the iterations; two workers print what a full run does."""
    f = flor_env
    edit(f, "package_trainer", "none")
    recorded = f.cli("run", "--name", "exp", "train.py", FLOR_EPSILON=DENSE)
    assert "mypkg/trainer.py:32: main loop `while True` in Trainer.run" in recorded.stderr
    assert "mypkg/trainer.py:33-40: block mypkg.trainer.Trainer.run.L0" in recorded.stderr
    run = f.latest_run("exp")
    listed = json.loads((run / "project.json").read_text())["files"]
    assert [e["path"] for e in listed] == [
        "mypkg/__init__.py",
        "mypkg/model.py",
        "mypkg/trainer.py",
    ]
    edit(f, "package_trainer", "outside")
    truth = f.python(f.work / "train.py").stdout
    segments = [f.cli("replay", "--name", "exp", "--segment", f"{i}/3") for i in (1, 2, 3)]
    covered = [it for seg in f.replays("exp") for it in seg["iterations"]]
    assert sorted(covered) == list(range(30)) and len(covered) == 30
    assert "".join(s.stdout for s in segments) == truth
    assert f.cli("replay", "--name", "exp", "--workers", "2").stdout == truth


def test_edits_the_plan_does_not_use_change_nothing(flor_env: Flor) -> None:
    """An edit in a project file the entry never imports, or after the call in the entry
    script, probes no block; an edit inside the callee in engine.py does."""
    f = flor_env
    edit(f, "engine_loop", "none")
    f.cli("run", "--name", "exp", "main.py", "--epochs", "3", FLOR_EPSILON=DENSE)
    (f.work / "unused.py").write_text("def helper():\n    return 2\n")
    replayed = f.cli("replay", "--name", "exp")
    assert probed(f) == [] and "unused.py" not in replayed.stderr
    engine = f.work / "engine.py"
    engine.write_text(engine.read_text().replace("batches += 1", "batches += 1\n        pass"))
    assert (
        f.cli("replay", "--name", "exp").stdout
        == f.python(f.work / "main.py", "--epochs", "3").stdout
    )
    assert probed(f) == ["module.L0"]


def test_instrument_prints_a_diff_per_file_and_writes_the_tree(flor_env: Flor) -> None:
    f = flor_env
    edit(f, "package_trainer", "none")
    shown = f.cli("instrument", "train.py")
    assert "+++ mypkg/trainer.py (instrumented)" in shown.stdout
    assert "train.py (instrumented)" not in shown.stdout  # the entry script is unchanged
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
