"""Two things at once against one store: runs of one name, replays of one run, gc mid-run.

Local files and the S3 server alike; ground truth is a plain run of the edited script.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import Flor
from test_s3 import EVERY_ITERATION, SCRIPT, _gated_script, _wait_for, write

pytestmark = pytest.mark.slow


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, flor_env: Flor) -> Flor:
    """``flor_env`` on the local store, or on the S3 server."""
    if request.param == "s3":
        return request.getfixturevalue("s3_flor")  # type: ignore[no-any-return]
    return flor_env


def _start(f: Flor, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "flor.cli", *args],
        env=f.env(**env),
        cwd=f.work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out, err


def _run_ids(f: Flor) -> list[str]:
    listed = f.cli("ls").stdout.split()
    return sorted(word for word in listed if word.count("-") == 2 and word[:8].isdigit())


def test_two_runs_of_one_name_at_once_are_both_kept_whole(store: Flor) -> None:
    f = store
    write(f, "none")
    both = [_start(f, "run", "--name", "ft", SCRIPT, **EVERY_ITERATION) for _ in range(2)]
    outputs = [_finish(p)[0] for p in both]
    assert outputs[0] == outputs[1] and "epoch 5" in outputs[0]
    ids = _run_ids(f)
    assert len(ids) == 2, f.cli("ls").stdout
    expected = f.truth(write(f, "outside"))
    for run_id in ids:
        shown = f.cli("show", "ft", "--run", run_id).stdout
        assert "status       finished" in shown
        assert "checkpoints  6 at iterations 0-5" in shown  # neither lost one to the other
        assert f.cli("replay", "--name", "ft", "--run", run_id).stdout == expected


def test_two_replays_of_one_run_at_once_print_the_full_run(store: Flor) -> None:
    f = store
    write(f, "none")
    f.cli("run", "--name", "ft", SCRIPT, **EVERY_ITERATION)
    expected = f.truth(write(f, "outside"))
    both = [_start(f, "replay", "--name", "ft", "--workers", "2") for _ in range(2)]
    assert [_finish(p)[0] for p in both] == [expected, expected]
    assert f.cli("replay", "--name", "ft").stdout == expected  # the record is as it was


def test_gc_while_a_run_records_leaves_it_and_its_blobs_alone(flor_env: Flor) -> None:
    f = flor_env
    write(f, "none")
    f.cli("run", "--name", "ft", SCRIPT, **EVERY_ITERATION)  # an older run, finished
    gate = f.work / "gate"
    _gated_script(f, "none")
    recording = _start(
        f, "run", "--name", "ft", SCRIPT, **EVERY_ITERATION, FLOR_TEST_GATE=str(gate)
    )
    _wait_for(lambda: len(list(f.home.glob("ft/*/journal/00000001.json"))) == 2, recording)
    blobs = sorted(p.name for p in f.home.glob(".blobs/*/*"))
    gc = f.cli("gc", "--keep", "0")
    assert "from 1 runs" in gc.stdout
    assert "alone (recording)" in gc.stderr
    assert sorted(p.name for p in f.home.glob(".blobs/*/*")) == blobs  # none went
    gate.touch()
    _finish(recording)
    (run_id,) = _run_ids(f)
    expected = f.truth(_gated_script(f, "outside"))
    assert f.cli("replay", "--name", "ft", "--run", run_id).stdout == expected
    after = f.cli("gc", "--keep", "0")  # it has ended: now it goes, and its blobs
    assert "from 1 runs" in after.stdout and "recording" not in after.stderr
    assert not list(f.home.glob(".blobs/*/*"))
