"""Without a run, flor is a no-op: same values, same control flow, nothing written."""

from __future__ import annotations

import itertools
import subprocess
import sys

import flor


def test_api_is_transparent() -> None:
    assert list(flor.it(range(3))) == [0, 1, 2]
    n = 0
    for _ in flor.it(lambda: n < 4):
        n += 1
    assert n == 4
    for i in flor.it(itertools.count()):
        if i == 5:
            break
    assert flor.SkipBlock.step_into("b") is True
    assert flor.SkipBlock.end(1) == 1
    assert flor.SkipBlock.end(1, 2) == (1, 2)
    assert flor.SkipBlock.end() is None
    assert flor.log("x", 3) == 3


def test_import_is_cheap_and_leaves_argv_alone(tmp_path) -> None:
    code = "import sys, flor; print('torch' in sys.modules, sys.argv[1:])"
    out = subprocess.run(
        [sys.executable, "-c", code, "--lr", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"FLOR_HOME": str(tmp_path / "h"), "PATH": ""},
        check=True,
    )
    assert out.stdout == "False ['--lr', '1']\n"
    assert not (tmp_path / "h").exists()
