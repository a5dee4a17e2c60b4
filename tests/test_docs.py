"""The commands the README and docs/ show, kept true.

Every command line in their shell blocks either runs here, literally (in a copy of
``examples/``, against a fresh store, in the order the pages give), or is the synopsis or
cluster command of a test named beside it in ``ELSEWHERE``. The README's diff is what
``flor instrument`` prints, and its record, edit, replay session prints what it shows.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"(flor|python|make|torchrun|sbatch|export|pip) ")
SHELLS = ("", "console", "bash", "sh")

# Commands that need a cluster, a server or a placeholder filled in: the test that runs them.
ELSEWHERE = {
    "make test": ".ci/run",  # CI runs the suite with it
    "make demo": "tests/test_docs.py::test_make_demo_records_edits_and_replays",
    "pip install 'flor[ray]'": "tests/test_docs.py::test_the_documented_extras_exist",
    "flor logs NAME --plot loss [-o loss.png]": "tests/test_run_replay.py::test_dataframe_and_plot",
    "flor push NAME / flor pull NAME": "tests/test_s3.py::test_push_delete_local_pull_replay",
    "flor push mnist --to s3://my-bucket/flor --delete-local": (
        "tests/test_s3.py::test_push_delete_local_pull_replay"
    ),
    "flor pull mnist --from s3://my-bucket/flor": (
        "tests/test_s3.py::test_push_delete_local_pull_replay"
    ),
    "export FLOR_STORE=s3://my-bucket/flor": (
        "tests/test_s3.py::test_record_to_s3_replay_from_s3_alone_lazily"
    ),
    "flor run --name mnist train.py": (
        "tests/test_s3.py::test_record_to_s3_replay_from_s3_alone_lazily"
    ),
    "flor replay --name mnist --workers 4": (
        "tests/test_s3.py::test_record_to_s3_replay_from_s3_alone_lazily"
    ),
    "flor replay --name mnist --workers 8 --backend ray --address auto": (
        "tests/test_ray.py::test_probed_block_over_two_ray_tasks_equals_full_run"
    ),
    "flor replay --name mnist train.py": (
        "tests/test_cluster.py::test_slurm_array_tasks_each_replay_their_segment"
    ),
    "sbatch replay.sbatch": "tests/test_cluster.py::test_slurm_array_tasks_each_replay_their_segment",
    "flor output mnist --replay slurm-<JOBID>": (
        "tests/test_cluster.py::test_slurm_array_tasks_each_replay_their_segment"
    ),
    "flor replay --name ddp": (
        "tests/test_distributed.py::test_a_torchrun_job_records_one_run_and_replays_alone_or_in_step"
    ),
}
TORCHRUN = (
    "tests/test_distributed.py::test_a_torchrun_job_records_one_run_and_replays_alone_or_in_step"
)
# Synopses the pages list: what runs here for each, after the README's session.
CONCRETE = {
    "flor show NAME": ["flor show mnist"],
    "flor logs NAME [--format table|csv|json]": [
        "flor logs mnist",
        "flor logs mnist --format csv",
        "flor logs mnist --format json",
    ],
    "flor diff NAME": ["flor diff mnist"],
    "flor gc --keep 3 [--checkpoints-only] [--older-than DAYS] [--dry-run]": [
        "flor gc --keep 3 --dry-run",
        "flor gc --keep 3 --checkpoints-only --older-than 30 --dry-run",
    ],
    "flor output NAME [--replay ID]": ["flor output mnist"],
}


def shell_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced shell block of a markdown ``text``."""
    blocks: list[list[str]] = []
    inside: str | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if inside is None:
                inside = line[3:].strip()
                blocks.append([])
                continue
            if inside not in SHELLS:
                blocks.pop()
            inside = None
        elif inside is not None:
            blocks[-1].append(line)
    return blocks


def commands(page: Path) -> list[str]:
    """The command lines of ``page``'s shell blocks, prompts and comments dropped."""
    found = []
    for block in shell_blocks(page.read_text()):
        for line in block:
            line = re.split(r"\s{2,}#", line.strip().removeprefix("$ "))[0].strip()
            if COMMAND.match(line):
                found.append(line)
    return found


def held_elsewhere(command: str) -> str | None:
    if command.startswith("torchrun "):
        return TORCHRUN
    return ELSEWHERE.get(command)


def test_every_documented_command_runs_here_or_in_a_named_test() -> None:
    missing = []
    for page in PAGES:
        for command in commands(page):
            where = held_elsewhere(command)
            if where is None:
                unfilled = re.search(r"\b(NAME|ID|DAYS)\b|[<>\[]", command)
                if unfilled and command not in CONCRETE:
                    missing.append(f"{page.name}: {command} (a synopsis: say what runs it)")
                continue
            if where == ".ci/run":
                if command not in (ROOT / ".ci" / "run").read_text():
                    missing.append(f"{page.name}: {command}, which .ci/run does not run")
                continue
            path, test = where.split("::")
            if f"def {test}(" not in (ROOT / path).read_text():
                missing.append(f"{page.name}: {command} -> {where}, which does not exist")
    assert not missing, "\n".join(missing)


def test_every_test_the_docs_name_exists() -> None:
    """docs/reliability.md holds each promise by a test's name: each must be a test."""
    named = re.findall(r"`(tests/\w+\.py)::(\w+)`", "".join(p.read_text() for p in PAGES))
    assert len(named) >= 20
    missing = [
        f"{path}::{test}" for path, test in named if f"def {test}(" not in (ROOT / path).read_text()
    ]
    assert not missing, missing


def test_the_documented_extras_exist() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = config["options.extras_require"]
    assert all(e in extras for e in ("ray", "pandas", "plot", "tensorboard"))


class Sandbox:
    """A copy of examples/ with a fresh store, where documented commands run as typed."""

    def __init__(self, tmp: Path) -> None:
        self.work = tmp / "work"
        shutil.copytree(ROOT / "examples", self.work / "examples")
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("FLOR_", "AWS_"))},
            "FLOR_HOME": str(tmp / "home"),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "",
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",  # flor
        }

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(command)
        argv = [sys.executable, *argv[1:]] if argv[0] == "python" else argv
        proc = subprocess.run(
            argv, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"`{command}` exited {proc.returncode}:\n{proc.stderr}"
        return proc


def readme_session() -> list[tuple[str, list[str]]]:
    """The README's ``$`` commands, each with the lines it shows as printed (flor's own
    ``flor:`` lines, on stderr, left out)."""
    text = (ROOT / "README.md").read_text().split("## Record, add a log line, replay", 1)[1]
    steps: list[tuple[str, list[str]]] = []
    for block in shell_blocks(text.split("\n## ", 1)[0]):
        for line in block:
            if line.startswith("$ "):
                steps.append((line[2:].split("  #")[0].strip(), []))
            elif steps and not line.startswith("flor:"):
                steps[-1][1].append(line)
    return steps


def readme_edit() -> str:
    """The line the README adds to the script, and after which line."""
    text = (ROOT / "README.md").read_text().split("## Record, add a log line, replay", 1)[1]
    return text.split("```python\n", 1)[1].split("```", 1)[0].rstrip("\n")


@pytest.mark.slow
def test_the_readme_and_the_guide_run_as_shown(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    diff = (ROOT / "README.md").read_text().split("```diff\n", 1)[1].split("```", 1)[0]
    assert diff in box.run("flor instrument examples/mnist_style.py").stdout

    (record, shown_record), (replay, shown_replay) = readme_session()
    assert box.run(record).stdout.splitlines() == shown_record
    script = box.work / "examples" / "mnist_style.py"
    anchor = "        scheduler.step()\n"
    script.write_text(script.read_text().replace(anchor, anchor + readme_edit() + "\n"))
    assert box.run(replay).stdout.splitlines() == shown_replay
    truth = box.run(f"python {record.split(' ', 4)[4]}").stdout

    for command in commands(ROOT / "docs" / "guide.md"):
        for concrete in CONCRETE.get(command, [command]):
            if held_elsewhere(concrete) is None:
                done = box.run(concrete)
                if "--workers" in concrete:  # with --runs: the one run's, under its header
                    shown = (
                        done.stdout.split(" <==\n", 1)[-1] if "--runs" in concrete else done.stdout
                    )
                    assert shown == truth, concrete


@pytest.mark.slow
def test_make_demo_records_edits_and_replays(tmp_path: Path) -> None:
    """What ``make demo`` runs once .venv is installed."""
    box = Sandbox(tmp_path)
    out = box.run("python examples/demo.py").stdout
    assert out.count("hindsight: weight norm") == 1 + 10 + 5, "the edit, each epoch, segment 2/2"
