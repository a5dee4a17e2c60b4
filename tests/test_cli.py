"""The flor command, through click's runner and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SCRIPTS, Flor

from flor.cli import cli


def test_instrument_prints_diff_and_report(tmp_path: Path) -> None:
    script = SCRIPTS / "plain" / "train_function.py"
    proc = subprocess.run(
        [sys.executable, "-m", "flor.cli", "instrument", str(script)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (
        proc.stdout.startswith("--- ")
        and "+    for epoch in flor.it(range(1, args.epochs + 1)):" in proc.stdout
    )
    assert "main loop `for epoch in range(1, args.epochs + 1)` in main" in proc.stderr
    out = tmp_path / "out.py"
    CliRunner().invoke(cli, ["instrument", str(script), "-o", str(out)], catch_exceptions=False)
    assert "flor.SkipBlock.step_into" in out.read_text()
    copy = tmp_path / "copy.py"
    copy.write_text(script.read_text())
    CliRunner().invoke(cli, ["instrument", str(copy), "--write"], catch_exceptions=False)
    assert copy.read_text() == out.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["instrument", "missing.py"], "cannot read missing.py"),
        (["show", "nosuch"], "no recorded run named 'nosuch'"),
        (["logs", "nosuch"], "no recorded run named 'nosuch'"),
        (["run", "--name", "x", "--storage", "ten", "t.py"], "storage budget 'ten' is not"),
    ],
)
def test_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv("FLOR_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"flor: error: {message}" + result.output.strip().split(message, 1)[1]
    ]


def test_a_store_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    """A recording opens its store before the script runs: a folder that cannot be made is
    one line, not a traceback from the first checkpoint's write."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    script = tmp_path / "t.py"
    script.write_text("for i in range(3):\n    print(i)\n")
    env = {k: v for k, v in os.environ.items() if k != "FLOR_STORE"}
    proc = subprocess.run(
        [sys.executable, "-m", "flor.cli", "run", "--name", "x", str(script)],
        env={**env, "FLOR_HOME": str(blocker / "home")},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == f"flor: error: cannot write to {blocker / 'home'}: Not a directory"


def test_unparsable_script(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("for x in range(3)\n    pass\n")
    result = CliRunner().invoke(cli, ["instrument", str(bad)])
    assert (
        result.exit_code == 2
        and f"flor: error: {bad}:1:" in result.output
        and "cannot parse" in result.output
    )


@pytest.mark.slow
def test_ls_show_logs_after_a_run(flor_env: Flor) -> None:
    f = flor_env
    script = f.copy("while_loop.py")
    f.python(script, "--flor", "exp", FLOR_EPSILON="1e9")
    edited = f.copy("while_loop.py", "outside")
    f.python(edited, "--flor", "exp", "--replay_flor", "2/2")

    def run(*args: str) -> str:
        return f.cli(*args).stdout

    assert "exp" in run("ls") and "finished" in run("ls")
    shown = run("show", "exp")
    assert "iterations   9" in shown and "checkpoints  9 at iterations 0-8" in shown
    rows = json.loads(run("logs", "exp", "--format", "json"))
    recorded = {
        r["iteration"]: r["value"] for r in rows if r["source"] == "record" and r["name"] == "loss"
    }
    replayed = [r for r in rows if r["source"].startswith("replay") and r["name"] == "bias"]
    assert (
        len(recorded) == 9 and replayed and {r["iteration"] for r in replayed} == set(range(4, 9))
    )
    assert "ITER" in run("logs", "exp") and run("logs", "exp", "--format", "csv").startswith(
        "source,iteration"
    )


@pytest.mark.slow
def test_instrumented_script_keeps_exit_status(flor_env: Flor) -> None:
    f = flor_env
    source = (SCRIPTS / "plain" / "while_condition.py").read_text() + "raise SystemExit(3)\n"
    original = f.work / "exits.py"
    original.write_text(source)
    inst = f.work / "inst.py"
    subprocess.run(
        [sys.executable, "-m", "flor.cli", "instrument", str(original), "-o", str(inst)],
        check=True,
        capture_output=True,
    )
    assert f.python(original, check=False).returncode == 3
    assert f.python(inst, check=False).returncode == 3
    recorded = f.python(inst, "--flor", "x", check=False)
    assert recorded.returncode == 3
    assert recorded.stdout == f.python(original, check=False).stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("run", "train.py"), "Missing option '--name'."),
        (("replay", "--name", "x", "--restore", "never"), "Invalid value for '--restore'"),
        (("bogus",), "No such command 'bogus'."),
    ],
)
def test_a_usage_mistake_is_one_line_too(flor_env: Flor, args: tuple[str, ...], said: str) -> None:
    """What click would say in three lines (usage, a hint, the error) is one ``flor: error:``
    line, exit status 2, like every other mistake."""
    proc = flor_env.cli(*args, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"flor: error: {said}") and proc.stderr.count("\n") == 1
