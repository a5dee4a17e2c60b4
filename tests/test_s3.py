"""Checkpoints in S3 (a real server on loopback) and deduplicated blobs, end to end.

Ground truth is a plain `python edited.py` run; every replay here must print it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from conftest import SCRIPTS, Flor, hindsight
from s3server import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.s3]
SCRIPT = "finetune_frozen.py"
EVERY_ITERATION = {"FLOR_EPSILON": "1e9"}  # checkpoint every iteration: segments have starts


def write(f: Flor, kind: str, extra: str = "") -> Path:
    """The script with its ``kind`` markers applied and ``extra`` code before each epoch's print."""
    path = f.work / SCRIPT
    source = hindsight((SCRIPTS / "plain" / SCRIPT).read_text(), kind)
    path.write_text(source.replace('        print(f"epoch', extra + '        print(f"epoch'))
    return path


def truth(f: Flor) -> str:
    """Edit the script (a hindsight print) and run it plainly."""
    return f.truth(write(f, "outside"))


def cache(f: Flor) -> Path:
    return f.home / ".cache"


def test_record_to_s3_replay_from_s3_alone_lazily(s3_flor: Flor) -> None:
    f = s3_flor
    write(f, "none")
    recorded = f.cli("run", "--name", "ft", SCRIPT, **EVERY_ITERATION)
    assert "epoch 5" in recorded.stdout
    expected = truth(f)
    shutil.rmtree(cache(f))  # nothing local: the store URL and credentials are all there is
    assert f.cli("replay", "--name", "ft", "--workers", "2").stdout == expected
    elsewhere = f.work / "cache"  # FLOR_CACHE: where the write-back cache lives
    f.cli("replay", "--name", "ft", "--iterations", "4", FLOR_CACHE=str(elsewhere))
    fetched = sorted(p.name for p in elsewhere.rglob("ckpt/*.pt"))
    # the state its segment starts from, and iteration 4's own block; not the other four
    assert fetched == ["00000003.main.L0.0.pt", "00000004.main.L0.0.pt"]


def test_frozen_backbone_is_stored_once_and_gc_keeps_shared_blobs(flor_env: Flor) -> None:
    f = flor_env
    write(f, "none")
    for _ in range(2):
        f.cli("run", "--name", "ft", SCRIPT, **EVERY_ITERATION)
    blobs = sorted(p.name for p in (f.home / ".blobs").rglob("*") if p.is_file())
    runs = sorted((f.home / "ft").iterdir())
    held = [
        set(ckpt["blobs"])
        for run in runs
        for entry in sorted(run.glob("journal/0*.json"))
        for ckpt in json.loads(entry.read_text())["blocks"].values()
    ]
    shared = set.intersection(*held)
    # the backbone's two weight matrices, and the inputs the scope holds (64 KiB chunks: 1 + 4
    # + 2): once for 12 checkpoints; beside them each holds its pack of small tensors (the
    # head that trains), equal in the second run to the first's
    assert len(held) == 12 and len(shared) == 7
    assert all(len(h - shared) == 1 for h in held)
    assert len(blobs) == 7 + 6
    first, second = (json.loads((r / "run.json").read_text()) for r in runs)
    backbone = (64 * 256 + 256 * 256) * 4 + 512 * 64 * 4  # bytes of the unchanging tensors
    assert first["checkpoint_bytes"] - first["stored_bytes"] == 5 * backbone  # 6 held, 1 stored
    new = [json.loads(e.read_text()) for e in sorted(runs[1].glob("journal/0*.json"))]
    assert [b["new_blob_bytes"] for e in new for b in e["blocks"].values()] == [0] * 6
    held_bytes = sum(sum(b["blobs"].values()) for e in new for b in e["blocks"].values())
    assert held_bytes > 6 * backbone  # the backbone, and the packs the first run stored too
    assert second["checkpoint_bytes"] - second["stored_bytes"] == held_bytes
    assert "deduplication saved" in f.cli("show", "ft").stdout

    assert "from 1 runs" in f.cli("gc", "--keep", "1").stdout
    assert all((f.home / ".blobs" / b[:2] / b).exists() for b in blobs)  # the kept run uses them
    expected = truth(f)
    assert f.cli("replay", "--name", "ft").stdout == expected
    f.cli("gc", "--keep", "0")
    assert not (f.home / ".blobs").exists()  # the last run gone, its blobs go too


def test_push_delete_local_pull_replay(s3_flor: Flor) -> None:
    f = s3_flor
    local = {"FLOR_STORE": ""}  # record into the local home, then push
    write(f, "none")
    f.cli("run", "--name", "ft", SCRIPT, **local, **EVERY_ITERATION)
    pushed = f.cli("push", "ft", "--to", f.store_url, "--delete-local", **local)
    assert "freed" in pushed.stderr
    assert not any(p.is_file() for p in f.home.rglob("*") if ".cache" not in p.parts)
    again = f.cli("push", "ft", "--to", f.store_url, check=False, **local)
    assert again.returncode == 2 and "no recorded run" in again.stderr
    f.cli("pull", "ft", "--from", f.store_url, **local)
    expected = truth(f)
    assert f.cli("replay", "--name", "ft", **local).stdout == expected
    repeat = f.cli("pull", "ft", "--from", f.store_url, **local)
    assert "0 objects (0.0 MB) copied" in repeat.stderr


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"AWS_SECRET_ACCESS_KEY": "wrong"}, "refused the credentials"),
        ({"FLOR_STORE": "s3://no-such-bucket/x"}, "does not exist"),
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "no AWS credentials"),
        ({"FLOR_STORE": "s3:///x"}, "names no bucket"),
    ],
    ids=["wrong-credentials", "missing-bucket", "no-credentials", "no-bucket-named"],
)
def test_s3_mistakes_are_one_line_errors_and_lose_nothing(
    s3_flor: Flor, env: dict[str, str], words: str
) -> None:
    f = s3_flor
    write(f, "none")
    f.cli("run", "--name", "ft", SCRIPT, FLOR_STORE="")
    before = sorted(p for p in f.home.rglob("*") if p.is_file())
    for command in (["run", "--name", "ft2", SCRIPT], ["push", "ft"], ["ls"]):
        out = f.cli(*command, check=False, **env)
        assert out.returncode == 2, command
        assert out.stderr.strip().splitlines()[-1].startswith("flor: error:"), out.stderr
        assert words in out.stderr and "Traceback" not in out.stderr
        assert "epoch" not in out.stdout  # refused before training, not after
    assert sorted(p for p in f.home.rglob("*") if p.is_file() and ".cache" not in p.parts) == [
        p for p in before if ".cache" not in p.parts
    ]


def test_corrupted_blob_in_s3_is_a_clear_error(s3_flor: Flor, s3_server: S3Server) -> None:
    f = s3_flor
    write(f, "none")
    f.cli("run", "--name", "ft", SCRIPT, **EVERY_ITERATION)
    bucket, prefix = f.store_url[len("s3://") :].split("/", 1)
    client = s3_server.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/.blobs/")
    for obj in listed["Contents"]:
        client.put_object(Bucket=bucket, Key=obj["Key"], Body=b"garbage")
    shutil.rmtree(cache(f))
    write(f, "outside")
    out = f.cli("replay", "--name", "ft", "--segment", "2/2", check=False)
    assert out.returncode == 2, out.stderr
    assert "fails its checksum" in out.stderr.strip().splitlines()[-1]
    assert "Traceback" not in out.stderr
    assert not list(cache(f).rglob(".blobs/*/*"))  # the corrupt bytes were not cached


GATE = '''import os, time


def _gate(epoch):
    """Test hook: epoch 2 waits until the file FLOR_TEST_GATE names exists (the server is down)."""
    gate = os.environ.get("FLOR_TEST_GATE")
    while gate and epoch == 2 and not os.path.exists(gate):
        time.sleep(0.01)


'''


def _gated_script(f: Flor, kind: str) -> Path:
    path = write(f, kind, extra="        _gate(epoch)\n")
    path.write_text(GATE + path.read_text())
    return path


@pytest.fixture
def private_s3(flor_env: Flor, tmp_path: Path) -> Iterator[S3Server]:
    """A server of this test's own, to take away without disturbing other tests."""
    server = S3Server(tmp_path / "s3-private")
    server.start()
    flor_env.extra = {**server.env(), "FLOR_STORE": server.bucket("flor-faults") + "/run"}
    flor_env.store_url = flor_env.extra["FLOR_STORE"]
    yield server
    server.stop()


def _record_with_outage(
    f: Flor, server: S3Server, come_back: bool, **env: str
) -> subprocess.CompletedProcess[str]:
    """Record; once iteration 1 is committed locally, stop the server, and only then let
    the script go on (epoch 2 waits for the gate file). With ``come_back``, start the server
    again once the run has said that uploads will retry; else after the run has ended."""
    _gated_script(f, "none")
    gate, errors = f.work / "gate", f.work / "stderr.txt"
    with errors.open("w") as stderr:
        proc = _start_gated_run(f, gate, stderr, **env)
        _wait_for(lambda: bool(list(cache(f).rglob("journal/00000001.json"))), proc)
        server.stop()
        gate.touch()
        if come_back:
            _wait_for(lambda: "uploads will retry" in errors.read_text(), proc)
            server.start()
        out, _ = proc.communicate(timeout=300)
    if not come_back:
        server.start()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, errors.read_text())


def _start_gated_run(f: Flor, gate: Path, stderr: IO[str], **env: str) -> subprocess.Popen[str]:
    """``flor run`` of the gated script, checkpointing every epoch; epoch 2 waits for ``gate``."""
    return subprocess.Popen(
        [sys.executable, "-m", "flor.cli", "run", "--name", "ft", SCRIPT],
        env=f.env(**EVERY_ITERATION, FLOR_TEST_GATE=str(gate), **env),
        cwd=f.work,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    """Until ``condition`` holds (an event the run causes), or the run ended, or a minute."""
    deadline = time.monotonic() + 60
    while not condition() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition(), "the run never got there"


def _replays_from_s3_alone(f: Flor) -> None:
    expected = f.truth(_gated_script(f, "outside"))
    shutil.rmtree(cache(f))
    assert f.cli("replay", "--name", "ft", "--workers", "2").stdout == expected


def test_server_stopped_mid_upload_then_back(flor_env: Flor, private_s3: S3Server) -> None:
    """Uploads retry while the server is away and the run ends once all are up."""
    recorded = _record_with_outage(flor_env, private_s3, come_back=True)
    assert recorded.returncode == 0, recorded.stderr
    assert "uploads will retry" in recorded.stderr
    _replays_from_s3_alone(flor_env)


def test_server_gone_past_the_timeout_keeps_everything_local(
    flor_env: Flor, private_s3: S3Server
) -> None:
    """The run ends with one error line saying how to finish; the command it names does."""
    f = flor_env
    recorded = _record_with_outage(f, private_s3, come_back=False, FLOR_UPLOAD_TIMEOUT="1")
    assert recorded.returncode == 2
    last = recorded.stderr.strip().splitlines()[-1]
    assert last.startswith("flor: error:") and "did not reach" in last
    assert "epoch 5" in recorded.stdout  # training itself went on and finished
    command = last[last.index("`") + 1 : last.rindex("`")]  # FLOR_HOME=... flor push NAME --to URL
    assignment, flor, *args = command.split()
    home = assignment.split("=", 1)[1]
    assert (Path(home) / "ft").is_dir()  # nothing local was deleted
    assert flor == "flor" and args == ["push", "ft", "--to", f.store_url]
    f.cli(*args, FLOR_HOME=home, FLOR_STORE="")
    _replays_from_s3_alone(f)


def test_server_down_when_the_run_starts_spools_then_uploads(
    flor_env: Flor, private_s3: S3Server
) -> None:
    """A blip at start does not kill the job: the run trains, spooled to the cache, and
    uploads once the server answers; replay then needs nothing but S3."""
    f = flor_env
    _gated_script(f, "none")
    private_s3.stop()
    gate, errors = f.work / "gate", f.work / "stderr.txt"
    with errors.open("w") as stderr:
        proc = _start_gated_run(f, gate, stderr)
        _wait_for(lambda: bool(list(cache(f).rglob("journal/00000001.json"))), proc)
        private_s3.start()
        gate.touch()
        out, _ = proc.communicate(timeout=300)
    said = errors.read_text()
    assert proc.returncode == 0, said
    assert "epoch 5" in out
    (warning,) = [line for line in said.splitlines() if "cannot reach" in line]
    assert warning.startswith("flor: warning:") and "uploading when it answers" in warning
    _replays_from_s3_alone(f)


def test_server_down_for_the_whole_run_then_flor_push(flor_env: Flor, private_s3: S3Server) -> None:
    f = flor_env
    _gated_script(f, "none")
    private_s3.stop()
    recorded = f.cli("run", "--name", "ft", SCRIPT, check=False, FLOR_UPLOAD_TIMEOUT="1")
    private_s3.start()
    assert recorded.returncode == 2 and "epoch 5" in recorded.stdout
    last = recorded.stderr.strip().splitlines()[-1]
    assert "did not reach" in last and "flor push ft" in last
    f.cli("push", "ft", "--to", f.store_url, FLOR_HOME=str(cache(f).joinpath(*_cache_parts(f))))
    _replays_from_s3_alone(f)


def _cache_parts(f: Flor) -> list[str]:
    """The cache folder of the store URL, below FLOR_HOME/.cache."""
    return ["s3", *f.store_url[len("s3://") :].split("/")]


def test_a_requeued_job_s_one_command_finishes_one_run_on_s3(s3_flor: Flor) -> None:
    """The same `flor run --resume` three times, killed twice (SIGKILL after a backward
    pass), the local cache deleted before each next attempt: one run, complete, exact."""
    from test_recovery import _run, _shape, killed_twice

    f = s3_flor
    script = _shape(f, "plain/epoch_inline.py")
    plain, total, plain_hashes = _run(f, "plain", (str(script),), hand=True)
    command = ("run", "--name", "job", "--resume", script.name)
    killed_twice(f, command, total, lambda: shutil.rmtree(cache(f), ignore_errors=True))
    done, _, hashes = _run(f, "third", command, FLOR_EPSILON="1e9")
    assert done.returncode == 0 and hashes == plain_hashes
    assert "resumed 2x" in f.cli("ls").stdout and len(f.cli("ls").stdout.splitlines()) == 2
    shutil.rmtree(cache(f), ignore_errors=True)
    assert f.cli("replay", "--name", "job").stdout == plain.stdout
