"""Hindsight across versions: one edit, every past run of an experiment, each replayed at
its own code version (``flor replay --runs``), against plain runs of each version with the
statement inserted by hand (``# @outside:`` markers, applied without flor)."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, Recordings, hindsight

from flor.errors import SKIPPED

VERSIONS = SCRIPTS / "versions"
pytestmark = pytest.mark.xdist_group("across_versions")
EDITED = (
    '`flor.log("weight_norm", model[0].weight.norm().item()); print(f"epoch {epoch} weight norm'
)


def write_version(folder: Path, k: int, kind: str = "none") -> Path:
    """Version ``k``'s files in ``folder``, its ``@outside`` markers applied for ``kind``."""
    folder.mkdir(exist_ok=True)
    (folder / "train.py").write_text(hindsight((VERSIONS / f"v{k}_train.py").read_text(), kind))
    helpers = VERSIONS / f"v{k}_helpers.py"
    if helpers.exists():
        (folder / "helpers.py").write_text(helpers.read_text())
    else:
        (folder / "helpers.py").unlink(missing_ok=True)
    return folder / "train.py"


def _versions_recorded(f: Flor, recordings: Recordings) -> list[str]:
    """Versions 1-5 recorded in turn in one folder (a renamed variable, a lower learning
    rate, one more layer, a helper moved to another file); their run ids, oldest first;
    today's script is version 5 with the hindsight edit."""

    def record(template: Flor) -> list[str]:
        for k in range(1, 6):
            write_version(template.work, k)
            template.cli("run", "--name", "mv", "train.py", FLOR_EPSILON="1e9")
        return [p.name for p in sorted((template.home / "mv").iterdir())]

    ids = recordings.into(f, ("versions",), record)
    write_version(f.work, 5, "outside")
    return ids


def by_hand(f: Flor, k: int) -> str:
    """What a plain run of version ``k`` with the statements inserted by hand prints."""
    return f.python(write_version(f.work / f"by-hand-{k}", k, "outside")).stdout


def sections(stdout: str) -> dict[str, str]:
    """``==> mv/ID (version V) <==`` headers and what follows each, by run id."""
    parts = re.split(r"^==> mv/(\S+) \(version \w+\) <==\n", stdout, flags=re.M)
    assert parts[0] == ""
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _version(show_edits: str, run_id: str) -> str:
    m = re.search(rf"^version (\w+) \(runs [^)]*{run_id}", show_edits, flags=re.M)
    assert m, show_edits
    return m.group(1)


def test_one_edit_replays_in_every_run_at_its_own_version(
    flor_env: Flor, recordings: Recordings
) -> None:
    f = flor_env
    ids = _versions_recorded(f, recordings)
    truths = {ids[k - 1]: by_hand(f, k) for k in range(2, 6)}
    assert all(t.count("weight norm") == 4 for t in truths.values())

    edits = f.cli("replay", "--name", "mv", "--runs", "all", "--show-edits", "train.py").stdout
    assert edits.count('+    flor.log("weight_norm"') == 4 and edits.count("+import flor") == 4
    assert f"skipped: the script: {EDITED}" in edits

    args = ("replay", "--name", "mv", "--runs", "all", "--workers", "2", "train.py")
    proc, backwards = f.counting_backwards("across", args, check=False)
    assert proc.returncode == SKIPPED, proc.stderr
    assert sections(proc.stdout) == truths  # v1 skipped; v2-v5 each as its hand-edited run
    assert backwards <= 0.25 * 4 * 16  # restored, not re-trained: at most a quarter of 4 runs
    (skipped,) = [line for line in proc.stderr.splitlines() if "skipped:" in line]
    assert skipped.startswith(
        f"flor: warning: run {ids[0]} (version {_version(edits, ids[0])}) skipped: the script: "
        f"{EDITED}"
    )
    assert skipped.endswith(
        "cannot be carried: it reads model, which this version does not define there"
    )
    assert "4 of 5 runs replayed, 1 skipped, 0 failed" in proc.stderr
    assert f"to version {_version(edits, ids[4])} (run {ids[4]}, the newest" in proc.stderr

    import flor

    frame = flor.dataframe("mv", home=str(f.home))
    hindsight_rows = frame[(frame.source == "replay") & (frame.name == "weight_norm")]
    assert sorted(set(hindsight_rows.run_id)) == ids[1:]
    assert len(hindsight_rows) == 16 and set(hindsight_rows.iteration) == {0, 1, 2, 3}
    for run_id, truth in truths.items():  # the logged values are the printed ones
        printed = [float(x) for x in re.findall(r"weight norm (\S+)", truth)]
        logged = hindsight_rows[hindsight_rows.run_id == run_id].sort_values("iteration").value
        assert [round(v, 6) for v in logged] == printed
    assert set(frame[frame.run_id == ids[1]].version) == {_version(edits, ids[1])}
    png = flor.plot("mv", "weight_norm", str(f.work / "norms.png"), home=str(f.home))
    assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _exported(f, ids, frame)


def _exported(f: Flor, ids: list[str], frame: object) -> None:
    """``flor export``: TensorBoard event files a reader finds the hindsight curves in, and
    the same rows as the dataframe in CSV."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    f.cli("export", "mv", "-o", "tb")
    assert sorted(p.name for p in (f.work / "tb").iterdir()) == ids[1:]  # v1 logged nothing
    for run_id in ids[1:]:
        events = EventAccumulator(str(f.work / "tb" / run_id))
        events.Reload()
        assert events.Tags()["scalars"] == ["hindsight/weight_norm"]
    curve = EventAccumulator(str(f.work / "tb" / ids[1]))
    curve.Reload()
    steps = [e.step for e in curve.Scalars("hindsight/weight_norm")]
    assert steps == [0, 1, 2, 3]
    f.cli("export", "mv", "--runs", "latest:2", "--format", "csv", "-o", "mv.csv")
    lines = (f.work / "mv.csv").read_text().splitlines()
    assert lines[0].startswith(
        "experiment,run_id,version,source,replay_id,iteration,step,name,value"
    )
    assert len(lines) == 1 + 8 and all(ids[3] in x or ids[4] in x for x in lines[1:])


def _store_digest(home: Path) -> str:
    """Every recorded file of the store (replays' own output aside)."""
    digest = hashlib.sha256()
    for p in sorted(home.rglob("*")):
        if p.is_file() and "replays" not in p.parts and not p.name.startswith(".tmp-reserve"):
            digest.update(str(p.relative_to(home)).encode() + p.read_bytes())
    return digest.hexdigest()


def test_mistakes_are_one_line_errors_and_change_nothing_recorded(
    flor_env: Flor, recordings: Recordings
) -> None:
    f = flor_env
    ids = _versions_recorded(f, recordings)
    before = _store_digest(f.home)
    mistakes = {
        ("--runs", "nope"): "--runs nope: mv has no run nope",
        ("--runs", "latest:0"): "--runs latest:0: not a selection",
        ("--runs", "all", "--run", ids[0]): "--runs replays whole runs: --run cannot go with it",
        ("--show-edits",): "--show-edits shows the edit carried to each of --runs",
        ("--runs", "all", "train.py", "--lr", "1"): "--runs replays whole runs: the script's",
    }
    for args, message in mistakes.items():
        proc = f.cli("replay", "--name", "mv", *args, check=False)
        assert proc.returncode == 2 and proc.stdout == "", (args, proc.stderr)
        assert proc.stderr.startswith(f"flor: error: {message}") and proc.stderr.count("\n") == 1

    plan = f.cli(
        "replay", "--name", "mv", "--runs", "all", "--plan", "train.py"
    ).stdout.splitlines()
    assert plan[0].startswith("the edit adds 2 statements to version ") and ids[4] in plan[0]
    assert plan[1].startswith(f"run {ids[0]}  version ") and "  skipped: the script: " in plan[1]
    for line, run_id in zip(plan[2:], ids[1:], strict=True):
        assert line.startswith(f"run {run_id}  version ")
        assert "carried: blocks restored in 4 iterations, re-run in 0; estimate " in line

    # An edit that only rewrites a statement extends no recorded version.
    script = f.work / "train.py"
    script.write_text(script.read_text().replace("lr=0.05", "lr=0.5"))
    proc = f.cli("replay", "--name", "mv", "--runs", "all", "train.py", check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("flor: error: train.py is no recorded version of mv with ")

    # A run whose sources are gone is skipped with one line; an edit that changes training
    # is warned of in each run it reaches.
    write_version(f.work, 5, "outside")
    script.write_text(
        script.read_text().replace("import flor\n", "import flor\ntorch.manual_seed(1)\n")
    )
    (f.home / "mv" / ids[1] / "original.py").unlink()
    before = _store_digest(f.home)
    proc = f.cli("replay", "--name", "mv", "--runs", f"{ids[1]},{ids[4]}", "train.py", check=False)
    assert proc.returncode == SKIPPED, proc.stderr
    assert (
        f"run {ids[1]} (version unknown) skipped: run mv/{ids[1]} has no recorded sources"
        in proc.stderr
    )
    reseeds = [line for line in proc.stderr.splitlines() if "reseeds" in line]
    assert len(reseeds) == 1 and reseeds[0].startswith(f"flor: warning: run {ids[4]}: train.py:")
    assert list(sections(proc.stdout)) == [ids[4]]
    assert _store_digest(f.home) == before


def test_hand_annotated_runs_and_an_s3_store(s3_flor: Flor) -> None:
    """The flor.it/SkipBlock API, recorded with --flor to s3://, replayed from S3 alone."""
    f = s3_flor
    template = (SCRIPTS / "while_loop.py").read_text()
    versions = [template, template.replace("lr=0.05", "lr=0.02")]
    for source in versions:
        (f.work / "loop.py").write_text(hindsight(source, "none"))
        f.python(f.work / "loop.py", "--flor", "wl", FLOR_EPSILON="1e9")
    truths = []
    for k, source in enumerate(versions):
        (f.work / f"by-hand-{k}.py").write_text(hindsight(source, "outside"))
        truths.append(f.python(f.work / f"by-hand-{k}.py").stdout)
    (f.work / "loop.py").write_text(hindsight(versions[1], "outside"))
    shutil.rmtree(f.home / ".cache")  # nothing local: the store URL and credentials are all
    proc = f.cli("replay", "--name", "wl", "--runs", "all", "--workers", "2")
    parts = re.split(r"^==> wl/\S+ \(version \w+\) <==\n", proc.stdout, flags=re.M)
    assert parts[1:] == truths and "bias" in truths[0]
    assert "2 of 2 runs replayed, 0 skipped, 0 failed" in proc.stderr
