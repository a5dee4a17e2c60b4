"""Helpers for end-to-end tests: run real scripts in real subprocesses."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from s3server import S3Server

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "scripts"
COUNTING = ROOT / "tests" / "counting"
EXIT_BEFORE_TEARDOWN = ROOT / "tests" / "exit_before_teardown.py"  # the plain torchrun truths
T = TypeVar("T")
_MARK = re.compile(r"^(?P<indent>\s*)(?P<code>.*?)\s*# @(?P<kind>[a-z]+): (?P<stmt>.+)$")


def pythonpath(*folders: Path) -> dict[str, str]:
    """The environment that puts ``folders`` first on PYTHONPATH, before the inherited one
    (a worktree's run points it at the tree under test); nothing for no folders."""
    if not folders:
        return {}
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    return {"PYTHONPATH": os.pathsep.join([*map(str, folders), *inherited])}


def hindsight(source: str, kind: str) -> str:
    """Apply the script's ``# @inside:``/``# @outside:`` markers of ``kind``.

    A marker on a code line inserts its statement after that line, at the same
    indentation; a marker alone on a line becomes that statement.
    """
    out = []
    for line in source.splitlines():
        m = _MARK.match(line)
        if not m:
            out.append(line)
            continue
        if m.group("code"):
            out.append(m.group("indent") + m.group("code"))
        if m.group("kind") == kind:
            out.append(m.group("indent") + m.group("stmt"))
    return "\n".join(out) + "\n"


class Flor:
    """Runs scripts plainly, recorded and replayed, against one FLOR_HOME."""

    def __init__(self, home: Path, work: Path) -> None:
        self.home = home
        self.work = work
        self.extra: dict[str, str] = {}  # more environment for every command (an S3 store)
        self.store_url = str(home)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOR_", "AWS_"))}
        # Restore wherever a checkpoint is: the suite checks what restoring does, and the
        # blocks of its tiny models run faster than their restores, which `auto` would
        # run instead (test_replay_e2e's rare_updates tests auto).
        env.update(FLOR_HOME=str(self.home), PYTHONHASHSEED="0", FLOR_RESTORE="always")
        env.update(self.extra)
        env.update(extra)
        return env

    def python(
        self, script: Path, *args: str, check: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """``python SCRIPT ARGS`` in the work dir."""
        return self._run([str(script), *args], check, env)

    def truth(self, script: Path | str, *args: str, **env: str) -> str:
        """What a full ``python SCRIPT ARGS`` prints: the ground truth a replay must equal.

        Deterministic, so run once per test worker for the same script, the same files it
        can import, arguments and environment (tests replay one edit in several ways)."""
        path = self.work / script  # the work dir's own, unless absolute
        environment = tuple(sorted({**self.extra, **env}.items()))
        key = (str(path.relative_to(self.work)), _importable(path), args, environment)
        if key not in _TRUTHS:
            _TRUTHS[key] = self.python(path, *args, **env).stdout
        return _TRUTHS[key]

    def python_m(self, module: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``python -m MODULE ARGS`` in the work dir."""
        return self._run(["-m", module, *args], True, {})

    def torchrun(
        self, *args: str, check: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """``torchrun --standalone --nproc_per_node 2 ARGS`` (gloo on CPU) in the work dir."""
        launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        return self._run([*launcher, *args], check, {"OMP_NUM_THREADS": "1", **env})

    def torchrun_truth(self, script: Path) -> str:
        """What a full plain torchrun of ``script`` prints, each rank ended as flor ends its
        processes, before the interpreter's teardown (``exit_before_teardown.py``)."""
        proc = self.torchrun(str(EXIT_BEFORE_TEARDOWN), str(script), check=False)
        if proc.returncode != 0:
            raise AssertionError(f"torchrun {script} exited {proc.returncode}:\n{proc.stderr}")
        return proc.stdout

    def cli(self, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        """``flor ARGS`` (the real command) in the work dir."""
        return self._run(["-m", "flor.cli", *args], check, env)

    def _run(
        self, args: list[str], check: bool, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            env=self.env(**env),
            cwd=self.work,
            timeout=600,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    def copy(self, name: str, kind: str | None = None, as_name: str | None = None) -> Path:
        """Copy tests/scripts/NAME into the work dir, with ``kind`` markers applied."""
        source = (SCRIPTS / name).read_text()
        path = self.work / (as_name or name)
        path.write_text(hindsight(source, kind) if kind else hindsight(source, "none"))
        return path

    def counting_backwards(
        self,
        tag: str,
        args: tuple[str, ...],
        hand: bool = False,
        torchrun: bool = False,
        check: bool = True,
        **env: str,
    ) -> tuple[subprocess.CompletedProcess[str], int]:
        """Run ``flor ARGS`` (``python ARGS`` when ``hand``; on 2 ranks when ``torchrun``)
        counting the backward passes in it and in every process it starts
        (``tests/counting``); the process and the count."""
        folder = self.work / f"count-{tag}"
        folder.mkdir()
        extra = {"COUNT_BACKWARDS_DIR": str(folder), "PYTHONPATH": str(COUNTING), **env}
        if hand:
            return _counted(folder, self.python(Path(args[0]), *args[1:], check=check, **extra))
        if torchrun:
            return _counted(folder, self.torchrun("-m", "flor.cli", *args, **extra))
        return _counted(folder, self.cli(*args, check=check, **extra))

    def replays(self, name: str) -> list[dict]:
        """Every segment result of every replay of the latest run of ``name``."""
        run = sorted((self.home / name).iterdir())[-1]
        return [json.loads(p.read_text()) for p in sorted(run.glob("replays/*/segment-*.json"))]

    def latest_run(self, name: str) -> Path:
        return sorted(p for p in (self.home / name).iterdir() if (p / "run.json").exists())[-1]


_TRUTHS: dict[tuple, str] = {}  # Flor.truth's, per test worker


class Recordings:
    """Recordings made once per test worker, each copied into every test that asks for it
    (which then replays, or damages, its own copy). Only for hand-annotated scripts, which
    replay by their own path: a run keeps its script's absolute path, so ``flor replay
    --name`` of a copy would run the template's script."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[tuple, tuple[Flor, Any]] = {}

    def into(self, f: Flor, key: tuple, record: Callable[[Flor], T]) -> T:
        """``record(template)`` once for ``key``; then ``f`` gets a copy of its store and
        work dir, and what ``record`` returned."""
        if key not in self.made:
            folder = self.root / f"recording-{len(self.made)}"
            template = Flor(folder / "home", folder / "work")
            template.work.mkdir(parents=True)
            template.extra = dict(f.extra)
            self.made[key] = (template, record(template))
        template, result = self.made[key]
        shutil.copytree(template.home, f.home, dirs_exist_ok=True)
        shutil.copytree(template.work, f.work, dirs_exist_ok=True)
        return result  # type: ignore[no-any-return]


def _importable(script: Path) -> str:
    """A digest of ``script`` and of what beside it it can import: each file or folder of its
    folder whose name the script's text mentions (an import names what it imports)."""
    text = script.read_text()
    digest = hashlib.sha256(text.encode())
    for entry in sorted(script.parent.iterdir()):
        if entry != script and re.search(rf"\b{re.escape(entry.stem)}\b", text):
            files = sorted(entry.rglob("*.py")) if entry.is_dir() else [entry]
            for path in files:
                digest.update(str(path.relative_to(script.parent)).encode() + path.read_bytes())
    return digest.hexdigest()


def _counted(
    folder: Path, proc: subprocess.CompletedProcess[str]
) -> tuple[subprocess.CompletedProcess[str], int]:
    return proc, sum(int(p.read_text()) for p in folder.glob("*.count"))


@pytest.fixture
def flor_env(tmp_path: Path) -> Flor:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    return Flor(home, work)


@pytest.fixture(scope="session")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Recordings:
    return Recordings(tmp_path_factory.mktemp("recordings"))


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One real S3 server (``weed mini``) per test worker, on loopback."""
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def s3_flor(flor_env: Flor, s3_server: S3Server, tmp_path: Path) -> Flor:
    """``flor_env`` recording to ``s3://flor-tests/<test>``: the S3 server, with a cache."""
    url = s3_server.bucket("flor-tests") + "/" + tmp_path.name
    flor_env.extra = {**s3_server.env(), "FLOR_STORE": url}
    flor_env.store_url = url
    return flor_env
