"""Where `flor instrument` finds the main loop across a project's files (PATTERNS 33).

Each project in tests/scripts/projects marks its main loop's line with `# @main-loop`, or,
when flor must refuse it, the line the refusal names with `# @refused`. The real command
runs on the project as it is (it writes nothing without -o or --write), and its decisions
on stderr must name exactly those lines.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import COUNTING, SCRIPTS, Flor, pythonpath

PROJECTS = SCRIPTS / "projects"

# project -> how it is started, and the folders it needs on PYTHONPATH (train_util's package
# sits above its scripts/, as after `pip install -e .`)
LAYOUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "engine_loop": (("main.py",), ()),
    "package_trainer": (("train.py",), ()),
    "algo_class": (("main.py",), ()),
    "train_util": (("scripts/train.py",), (".",)),
    "star_import": (("main.py",), ()),
    "runner_chain": (("main.py",), ()),
    "nested_function": (("main.py",), ()),
    "fitter_method": (("train.py",), ()),
    "relative_subpkg": (("-m", "proj.tools.train"), ()),
    "loader_workers": (("train.py",), ()),
    "factory_trainer": (("main.py",), ()),
    "hogwild": (("main.py",), ()),
    "spawn_elsewhere": (("main.py",), ()),
}


def marked(project: Path, marker: str) -> list[str]:
    """``path:line`` of every line of the project's files that ends with ``marker``."""
    found = []
    for path in sorted(project.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.rstrip().endswith(marker):
                found.append(f"{path.relative_to(project).as_posix()}:{number}")
    return found


def instrument(project: Path, entry: tuple[str, ...], paths: tuple[str, ...]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOR_")}
    env.update(pythonpath(*(project / p for p in paths)))
    proc = subprocess.run(
        [sys.executable, "-m", "flor.cli", "instrument", *entry],
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_every_project_is_a_layout() -> None:
    assert sorted(LAYOUTS) == sorted(p.name for p in PROJECTS.iterdir() if p.is_dir())
    assert len([p for p in LAYOUTS if marked(PROJECTS / p, "# @main-loop")]) >= 10


@pytest.mark.parametrize("project", sorted(LAYOUTS))
def test_the_main_loop_is_found_in_whichever_file_holds_it(project: str) -> None:
    """One training loop: found at its line, with one block; a refusal names its line."""
    entry, paths = LAYOUTS[project]
    decisions = instrument(PROJECTS / project, entry, paths)
    loops = re.findall(r"^(\S+:\d+): main loop ", decisions, re.MULTILINE)
    refused = marked(PROJECTS / project, "# @refused")
    if refused:
        assert loops == [], decisions
        assert re.search(
            rf"^{re.escape(refused[0])}: warning: `[^`]+`: .*(multiprocessing|mp\.spawn)",
            decisions,
            re.MULTILINE,
        ), decisions
        assert "no training loop found" not in decisions
        return
    assert loops == marked(PROJECTS / project, "# @main-loop"), decisions
    assert len(re.findall(r": block \S+ \(", decisions)) == 1, decisions


def test_a_recording_start_parses_each_project_file_once(flor_env: Flor) -> None:
    """``flor run`` reads the project (entry script, the files it imports) and checks it:
    instrumenting it, its imports, sharded state, the loop's tests. Each file is parsed once
    by libcst (the rewrite) and at most once by ``ast`` (the checks share one tree)."""
    f = flor_env
    shutil.copytree(PROJECTS / "engine_loop", f.work, dirs_exist_ok=True)
    log = f.work / "parses.txt"
    f.cli("run", "--name", "exp", "main.py", COUNT_PARSES_FILE=str(log), **pythonpath(COUNTING))
    parses = collections.Counter(log.read_text().split("\n"))
    files = ["main.py", "engine.py", "utils.py"]
    for name in files:
        sha = hashlib.sha1((f.work / name).read_bytes()).hexdigest()
        assert parses[f"libcst {sha}"] == 1, name
        assert parses[f"ast {sha}"] <= 1, name
