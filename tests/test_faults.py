"""What users get when things go wrong: kills, corrupt data, bad input, a full disk."""

from __future__ import annotations

import json
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Flor

from flor.runtime.state.codec import decode, encode
from flor.store import LocalStore

pytestmark = pytest.mark.slow


def _commits(f: Flor, name: str) -> list:
    runs = list((f.home / name).glob("*/journal/0*.json")) if (f.home / name).exists() else []
    return sorted(runs)


def test_sigkilled_record_replays_up_to_last_checkpoint(flor_env: Flor) -> None:
    f = flor_env
    script = f.copy("slow_steps.py")
    proc = subprocess.Popen(  # iteration 6 hangs: iterations 0-5 are committed, then the kill
        [sys.executable, str(script), "--flor", "killed", "40"],
        env=f.env(HANG_AT="6", FLOR_EPSILON="1e9"),
        cwd=f.work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120  # the background writer commits 0-5 while 6 hangs
    while len(_commits(f, "killed")) < 6 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    committed = len(_commits(f, "killed"))
    assert committed == 6

    edited = f.copy("slow_steps.py", "outside")
    truth = f.truth(edited, "40").splitlines(keepends=True)
    replayed = f.python(edited, "--flor", "killed", "--replay_flor", "40")
    lines_per_iteration = 2
    assert replayed.stdout == "".join(truth[: committed * lines_per_iteration])
    for i in (1, 2):
        seg = f.python(edited, "--flor", "killed", "--replay_flor", f"{i}/2", "40")
        assert seg.returncode == 0 and seg.stdout


def test_a_record_killed_before_its_first_iteration_says_there_is_nothing_to_replay(
    flor_env: Flor,
) -> None:
    f = flor_env
    (f.work / "early.py").write_text(
        "import os, signal\nimport torch\n\nmodel = torch.nn.Linear(2, 1)\n"
        "os.kill(os.getpid(), signal.SIGKILL)  # lost during set-up\n"
        "for epoch in range(3):\n    model(torch.ones(2)).sum().backward()\n    print(epoch)\n"
    )
    assert f.cli("run", "--name", "early", "early.py", check=False).returncode == -signal.SIGKILL
    out = f.cli("replay", "--name", "early", check=False)
    assert out.returncode == 2 and out.stdout == ""
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("flor: error: run early/") and "recorded no iterations" in last


def test_a_long_stretch_without_checkpoints_is_journaled_as_it_goes(flor_env: Flor) -> None:
    """Only iteration 0 is checkpointed; the iterations after it are still journaled every
    1,000 (their output, timings, counters), so a run killed at iteration 2,300 replays to
    iteration 2,000, not only to 0."""
    f = flor_env
    script = f.copy("slow_steps.py")
    journal = f.home / "long"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--flor", "long", "3000"],
        env=f.env(HANG_AT="2300", FLOR_EPSILON="1e-9"),
        cwd=f.work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not list(journal.glob("*/journal/00002000.json")) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    entries = sorted(p.name for p in journal.glob("*/journal/0*.json"))
    assert entries == ["00000000.json", "00001000.json", "00002000.json"]

    edited = f.copy("slow_steps.py", "outside")
    truth = f.truth(edited, "3000").splitlines(keepends=True)
    replayed = f.python(edited, "--flor", "long", "--replay_flor", "3000")
    assert replayed.stdout == "".join(truth[: 2001 * 2])  # two lines per iteration


@pytest.fixture(scope="module")
def dense_recording(tmp_path_factory: pytest.TempPathFactory) -> Flor:
    """``slow_steps.py 8`` recorded as ``exp`` with a checkpoint every iteration, once."""
    root = tmp_path_factory.mktemp("dense")
    (root / "work").mkdir()
    f = Flor(root / "home", root / "work")
    f.python(f.copy("slow_steps.py"), "--flor", "exp", "8", FLOR_EPSILON="1e9", WIDTH="4")
    return f


@pytest.fixture
def dense(flor_env: Flor, dense_recording: Flor) -> Flor:
    """``flor_env`` holding its own copy of ``dense_recording`` (tests damage it)."""
    shutil.copytree(dense_recording.home, flor_env.home)
    shutil.copy(dense_recording.work / "slow_steps.py", flor_env.work)
    return flor_env


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("flor: error: ")
    for w in words:
        assert w in lines[0]


@pytest.mark.parametrize(
    "damage",
    [lambda b: b[:-10] + b"0123456789", lambda b: b[: len(b) // 2]],
    ids=["bytes-changed", "truncated"],
)
def test_corrupt_checkpoint_inside_segment_is_reexecuted(
    dense: Flor, damage: Callable[[bytes], bytes]
) -> None:
    f = dense
    ckpt = sorted(f.latest_run("exp").glob("ckpt/00000005.*"))[0]
    ckpt.write_bytes(damage(ckpt.read_bytes()))
    edited = f.copy("slow_steps.py", "outside")
    truth = f.truth(edited, "8")
    replayed = f.python(edited, "--flor", "exp", "--replay_flor", "8")
    assert replayed.stdout == truth
    warning = _the_line(replayed.stderr, "unusable")
    assert f"{f.latest_run('exp').name}/ckpt/00000005" in warning  # the run and the file
    assert "checksum mismatch" in warning and "re-executing" in warning


def _the_line(stderr: str, word: str) -> str:
    """The one line of ``stderr`` that holds ``word``: a fault is said once."""
    (line,) = [line for line in stderr.splitlines() if word in line]
    return line


def _forge(f: Flor, iteration: int, edit: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite iteration ``iteration``'s checkpoint as ``edit`` changes its tree, and its
    journal entry's checksum to match: a forgery by someone who can write the store."""
    run = f.latest_run("exp")
    store = LocalStore(f.home)
    entry_path = run / "journal" / f"{iteration:08d}.json"
    commit = json.loads(entry_path.read_text())
    entry = commit["blocks"]["work/0"]
    tree = decode(store.get(entry["key"]), entry["sha256"], entry["key"], store)
    edit(tree)
    forged = encode(tree)
    store.put(entry["key"], forged.data)
    entry["sha256"], entry["bytes"] = forged.sha256, len(forged.data)
    entry_path.write_text(json.dumps(commit))


class _RunsCode:
    """What a crafted pickle looks like: unpickling it runs a shell command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_crafted_to_run_code_is_refused_and_reexecuted(dense: Flor) -> None:
    f = dense
    marker = f.work / "pwned"
    crafted = {"k": "pickle", "v": pickle.dumps(_RunsCode(marker))}
    _forge(f, 5, lambda tree: tree["objs"].__setitem__(1, crafted))  # the optimizer's place
    edited = f.copy("slow_steps.py", "outside")
    replayed = f.python(edited, "--flor", "exp", "--replay_flor", "8")
    assert not marker.exists(), "the crafted pickle ran"
    assert replayed.stdout == f.truth(edited, "8")
    warning = _the_line(replayed.stderr, "unusable")
    assert "ckpt/00000005" in warning and "posix.system" in warning and "re-executing" in warning


def test_a_journal_entry_pointing_at_another_checkpoint_is_refused(dense: Flor) -> None:
    f = dense
    run = f.latest_run("exp")
    entries = [run / "journal" / f"{i:08d}.json" for i in (3, 5)]
    third, fifth = (json.loads(p.read_text()) for p in entries)
    fifth["blocks"]["work/0"] = third["blocks"]["work/0"]  # iteration 3's state, unchanged
    entries[1].write_text(json.dumps(fifth))
    edited = f.copy("slow_steps.py", "outside")
    replayed = f.python(edited, "--flor", "exp", "--replay_flor", "8")
    assert replayed.stdout == f.truth(edited, "8")
    warning = _the_line(replayed.stderr, "unusable")
    assert "00000003" in warning and "points at" in warning and "re-executing" in warning


def test_a_manifest_pointing_at_other_chunks_fails_its_checksum(flor_env: Flor) -> None:
    f = flor_env
    script = f.copy("slow_steps.py")
    f.python(script, "--flor", "exp", "4", FLOR_EPSILON="1e9", WIDTH="300")
    run = f.latest_run("exp")
    store = LocalStore(f.home)
    manifests = []
    for i in (0, 2):
        entry = json.loads((run / "journal" / f"{i:08d}.json").read_text())["blocks"]["work/0"]
        manifests.append((entry, decode(store.get(entry["key"]), entry["sha256"], "", store)))
    assert manifests[0][0]["blobs"], "the weights are chunked"
    (first, _), (second, tree) = manifests
    tree["objs"][0] = manifests[0][1]["objs"][0]  # iteration 0's weights, by their chunks
    store.put(second["key"], encode(tree, store).data)  # its journal entry is left as it was
    edited = f.copy("slow_steps.py", "outside")
    replayed = f.python(edited, "--flor", "exp", "--replay_flor", "4", WIDTH="300")
    assert replayed.stdout == f.truth(edited, "4", WIDTH="300")
    assert "ckpt/00000002" in replayed.stderr and "checksum mismatch" in replayed.stderr


def test_a_truncated_journal_entry_is_said_and_its_iteration_reexecuted(dense: Flor) -> None:
    f = dense
    entry = f.latest_run("exp") / "journal" / "00000004.json"
    entry.write_text(entry.read_text()[:40])
    before = {p: p.read_bytes() for p in f.home.rglob("*") if p.is_file()}
    for kind in ("none", "outside"):  # its recorded output is gone too: iteration 4 re-runs
        edited = f.copy("slow_steps.py", kind)
        replayed = f.python(edited, "--flor", "exp", "--replay_flor", "8")
        assert replayed.stdout == f.truth(edited, "8")
        warning = _the_line(replayed.stderr, "unreadable")
        assert "journal/00000004.json" in warning and "re-execute" in warning
    assert all(p.read_bytes() == data for p, data in before.items()), "the record changed"


def test_missing_checkpoint_at_segment_start_is_one_line_error(dense: Flor) -> None:
    f = dense
    (sorted(f.latest_run("exp").glob("ckpt/00000003.*"))[0]).unlink()  # segment 2/2 starts at 4
    edited = f.copy("slow_steps.py", "outside")
    proc = f.python(edited, "--flor", "exp", "--replay_flor", "2/2", "8", check=False)
    _one_line_error(proc, "missing")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--flor", "nosuch", "--replay_flor"], ["no recorded run named 'nosuch'"]),
        (["--flor", "exp", "--replay_flor", "4/3"], ["4/3", "outside 1..3"]),
        (["--flor", "exp", "--replay_flor", "0/3"], ["outside"]),
        (["--flor", "exp", "--replay_flor=x/y"], ["not of the form I/N"]),
        (["--flor"], ["needs a run name"]),
        (["--flor", "bad/name"], ["run name"]),
    ],
)
def test_bad_flags_are_one_line_errors(dense: Flor, flags: list[str], words: list[str]) -> None:
    f = dense
    before = sorted(p.name for p in f.home.rglob("*"))
    proc = f.python(f.copy("slow_steps.py"), *flags, check=False)
    _one_line_error(proc, *words)
    assert proc.stdout == ""
    assert sorted(p.name for p in f.home.rglob("*")) == before, "nothing written"


def test_renamed_block_is_refused(dense: Flor) -> None:
    f = dense
    edited = f.work / "renamed.py"
    edited.write_text((f.work / "slow_steps.py").read_text().replace('"work"', '"other"'))
    proc = f.python(edited, "--flor", "exp", "--replay_flor", "8", check=False)
    _one_line_error(proc, "no longer match", "work")


def test_script_flags_after_flor_flags_reach_the_script(flor_env: Flor) -> None:
    f = flor_env
    proc = f.python(f.copy("slow_steps.py"), "--flor", "exp", "3", FLOR_EPSILON="1e9")
    assert proc.stdout.count("iter ") == 3
    proc = f.python(f.work / "slow_steps.py", "--flor", "exp", "--replay_flor", "1/2", "3")
    assert proc.stdout.count("iter ") == 2


def test_full_disk_skips_checkpoints_and_training_goes_on(flor_env: Flor) -> None:
    f = flor_env
    script = f.copy("slow_steps.py")
    plain = f.truth(script, "6", WIDTH="300")

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))

    proc = subprocess.run(
        [sys.executable, str(script), "--flor", "full", "6"],
        env=f.env(WIDTH="300", FLOR_EPSILON="1e9"),
        cwd=f.work,
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == plain
    assert "flor: warning: checkpoint of iteration 0 skipped" in proc.stderr
    assert _commits(f, "full") == []
    edited = f.copy("slow_steps.py", "outside")
    truth = f.truth(edited, "6", WIDTH="300")
    assert f.python(edited, "--flor", "full", "--replay_flor", "6", WIDTH="300").stdout == truth


def _small_filesystem(folder: Path, kib: int, command: list[str], keep: Path) -> tuple[str, str]:
    """Run ``command`` with a tmpfs of ``kib`` KiB mounted on ``folder`` (a private mount
    namespace: no root needed where user namespaces are allowed), then copy what the
    filesystem holds to ``keep``; the command's stdout and stderr."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a small filesystem")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not allowed here: {probe.stderr.decode().strip()}")
    folder.mkdir(parents=True, exist_ok=True)
    out, err = keep.with_suffix(".out"), keep.with_suffix(".err")
    shell = (
        f"mount -t tmpfs -o size={kib}k none '{folder}' && "
        f"{' '.join(repr(c) for c in command)} > '{out}' 2> '{err}'; "
        f"status=$?; cp -a '{folder}' '{keep}'; exit $status"
    )
    done = subprocess.run(["unshare", "-rm", "sh", "-c", shell], timeout=300, check=False)
    assert done.returncode == 0, err.read_text() if err.exists() else "no filesystem"
    return out.read_text(), err.read_text()


def test_a_full_disk_stops_checkpoints_once_and_replay_uses_what_was_committed(
    flor_env: Flor,
) -> None:
    """A 3 MiB filesystem holds two of twelve 0.36 MB checkpoints beside flor's 1 MiB
    reserve: training goes on, one warning says which iterations stay covered, the run's
    record is complete, and a replay equals a full run of the edited script."""
    f = flor_env
    script = f.copy("slow_steps.py")
    mounted, kept = f.work / "small", f.work / "kept"
    env = f.env(WIDTH="300", FLOR_EPSILON="1e9", FLOR_HOME=str(mounted))
    settings = [f"{k}={v}" for k, v in env.items()]
    stdout, stderr = _small_filesystem(
        mounted, 3072, ["env", *settings, sys.executable, str(script), "--flor", "full", "12"], kept
    )
    assert stdout == f.truth(script, "12", WIDTH="300")
    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert warnings == [
        "flor: warning: the store is out of space (No space left on device) at iteration 2: "
        "no more checkpoints; iterations up to 1 replay from checkpoints, later ones re-execute"
    ]
    run = next((kept / "full").iterdir())
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "finished" and meta["warnings"] == [
        warnings[0][len("flor: warning: ") :]
    ]
    assert sorted(p.name for p in (run / "journal").iterdir()) == [
        "00000000.json", "00000001.json", "loop-000.json"
    ]  # fmt: skip
    assert not list(kept.glob(".tmp-*")), "the reserve and partial writes are gone"
    edited = f.copy("slow_steps.py", "outside")
    replayed = f.python(
        edited, "--flor", "full", "--replay_flor", "12", WIDTH="300", FLOR_HOME=str(kept)
    )
    assert replayed.stdout == f.truth(edited, "12", WIDTH="300")


RAISES_IN_BLOCK = """
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(4):
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if epoch == 2:
            raise ValueError("diverged")
    print(f"epoch {epoch} loss {loss.item():.4f}")
"""


def test_an_exception_inside_the_training_is_the_script_s_traceback_alone(
    flor_env: Flor,
) -> None:
    """The script's own error, as python prints it: no flor-internal traceback about a block
    left open (the generator of the main loop closed after the exception)."""
    f = flor_env
    (f.work / "raises.py").write_text(RAISES_IN_BLOCK)
    plain = f.python(f.work / "raises.py", check=False)
    recorded = f.cli("run", "--name", "exp", "raises.py", check=False)
    assert recorded.returncode == plain.returncode == 1 and recorded.stdout == plain.stdout
    assert "ValueError: diverged" in recorded.stderr
    assert "Exception ignored" not in recorded.stderr and "SkipBlock" not in recorded.stderr
    assert "failed (exit status 1) after its loop was left in iteration 2" in recorded.stderr
    shown = f.cli("show", "exp").stdout
    assert "failed (exit status 1; its loop stopped in iteration 2)" in shown

    # A print added after the block: the replay prints what a plain run of the edited script
    # prints, then fails with its traceback and exit status.
    edited = RAISES_IN_BLOCK.replace(
        "    print(f", "    print(f'norm {model.weight.norm().item():.4f}')\n    print(f"
    )
    (f.work / "raises.py").write_text(edited)
    plain = f.python(f.work / "raises.py", check=False)
    replayed = f.cli("replay", "--name", "exp", check=False)
    assert replayed.returncode == plain.returncode == 1
    assert replayed.stdout == plain.stdout and "norm" in plain.stdout
    assert _traceback(replayed.stderr) == _traceback(plain.stderr)
    assert "replaying iteration 2" in replayed.stderr  # flor says where, after it
    assert "flor: raises.py:" in replayed.stderr  # the script named as `flor run` named it


def _traceback(stderr: str) -> list[str]:
    """The traceback python printed: from its first line to the exception's."""
    lines = stderr.splitlines()
    start = lines.index("Traceback (most recent call last):")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("ValueError"))
    return lines[start : end + 1]


def test_a_script_without_a_loop_that_exits_0_is_finished(flor_env: Flor) -> None:
    f = flor_env
    (f.work / "once.py").write_text("import torch\nprint(torch.ones(2).sum().item())\n")
    f.cli("run", "--name", "once", "once.py")
    assert f.cli("show", "once").stdout.count("finished") == 1
    assert f.cli("ls").stdout.split()[-1] == "finished"
