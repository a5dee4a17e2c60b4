"""Hindsight across versions: one edit, every past run of an experiment, each replayed at
its own code version (``flor replay --runs``), against plain runs of each version with the
statement inserted by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, hindsight

from flor.errors import SKIPPED

VERSIONS = SCRIPTS / "versions"
STATEMENT = "weight norm"  # what the hindsight line prints
pytestmark = pytest.mark.xdist_group("across_versions")


def _write_version(folder: Path, k: int, kind: str = "none") -> None:
    """Version ``k``'s files in ``folder``, its ``@outside`` markers applied for ``kind``."""
    folder.mkdir(exist_ok=True)
    (folder / "train.py").write_text(hindsight((VERSIONS / f"v{k}_train.py").read_text(), kind))
    helpers = VERSIONS / f"v{k}_helpers.py"
    if helpers.exists():
        (folder / "helpers.py").write_text(helpers.read_text())
    else:
        (folder / "helpers.py").unlink(missing_ok=True)


def _record_every_version(f: Flor) -> list[str]:
    """Record versions 1-5 in turn in one folder; their run ids, oldest first."""
    for k in range(1, 6):
        _write_version(f.work, k)
        f.cli("run", "--name", "mv", "train.py", FLOR_EPSILON="1e9")
    return [p.name for p in sorted((f.home / "mv").iterdir())]


def _sections(stdout: str) -> dict[str, str]:
    """``==> mv/ID (version V) <==`` headers and what follows each, by run id."""
    parts = re.split(r"^==> mv/(\S+) \(version \w+\) <==\n", stdout, flags=re.M)
    assert parts[0] == ""
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_one_edit_replays_in_every_run_at_its_own_version(flor_env: Flor) -> None:
    f = flor_env
    ids = _record_every_version(f)
    truths = {}
    for k in range(2, 6):  # the statement inserted by hand, without flor, in each version
        _write_version(f.work / f"by-hand-{k}", k, "outside")
        truths[ids[k - 1]] = f.python(f.work / f"by-hand-{k}" / "train.py").stdout
        assert truths[ids[k - 1]].count(STATEMENT) == 4
    _write_version(f.work, 5, "outside")  # today's script, edited

    edits = f.cli("replay", "--name", "mv", "--runs", "all", "--show-edits").stdout
    assert edits.count('+    print(f"epoch {epoch} weight norm') == 4, edits
    assert 'skipped: the script: `print(f"epoch {epoch} weight norm' in edits

    (proc, backwards) = f.counting_backwards(
        "across", ("replay", "--name", "mv", "--runs", "all", "--workers", "2"), check=False
    )
    assert proc.returncode == SKIPPED, proc.stderr
    assert _sections(proc.stdout) == truths  # v1 skipped; v2-v5 each as a hand-edited run
    assert backwards <= 0.25 * 4 * 16  # restored, not re-trained: at most a quarter of 4 runs
    skipped = [line for line in proc.stderr.splitlines() if "skipped:" in line]
    assert skipped == [
        f"flor: warning: run {ids[0]} (version {_version(edits, ids[0])}) skipped: the script: "
        '`print(f"epoch {epoch} weight norm {model[0].weight.norm().item():.6f}")` cannot be '
        "carried: it reads model, which this version does not define there"
    ]
    assert "4 of 5 runs replayed, 1 skipped, 0 failed" in proc.stderr
    assert f"to version {_version(edits, ids[4])} (run {ids[4]}" in proc.stderr


def _version(show_edits: str, run_id: str) -> str:
    m = re.search(rf"^version (\w+) \(runs [^)]*{run_id}", show_edits, flags=re.M)
    assert m, show_edits
    return m.group(1)
