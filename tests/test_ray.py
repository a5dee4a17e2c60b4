"""`flor replay --backend ray` against a real local Ray head (2 CPUs) started here.

Ground truth is a plain `python edited.py` run of the edited script.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, hindsight

pytest.importorskip("ray")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.xdist_group("ray"),
]  # one head for the module
SCRIPT = "train_function.py"
ARGS = ["--epochs", "6"]
NO_TOKEN = {"RAY_AUTH_MODE": "disabled"}  # a loopback test cluster: no token to hand around
PROBE = 'print(f"  grad norm {model.fc1.weight.grad.norm():.5f}")'


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``ray start --head`` with 2 CPUs, on a free port; its address."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("ray") / "head.log"
    ray = Path(sys.executable).parent / "ray"
    with open(log, "wb") as out:
        head = subprocess.Popen(
            [str(ray), "start", "--head", "--block", "--num-cpus=2", f"--port={port}"]
            + ["--include-dashboard=false", "--disable-usage-stats"],
            stdout=out,
            stderr=out,
            start_new_session=True,  # its raylet and workers die with it
            env={**os.environ, **NO_TOKEN},
        )
    deadline = time.monotonic() + 120
    while b"--block" not in log.read_bytes():  # printed once the head is up
        assert head.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    os.killpg(head.pid, signal.SIGKILL)
    head.wait()


def edited(f: Flor, extra: str = "") -> Path:
    """The script with a print inside the training loop (every block probed), plus ``extra``
    after it."""
    source = hindsight((SCRIPTS / "plain" / SCRIPT).read_text(), "inside")
    if extra:
        source = source.replace(PROBE, PROBE + "\n        " + extra)
    path = f.work / SCRIPT
    path.write_text("import os\n" + source)
    return path


def record(f: Flor) -> None:
    f.extra.update(NO_TOKEN)
    (f.work / SCRIPT).write_text(hindsight((SCRIPTS / "plain" / SCRIPT).read_text(), "none"))
    f.cli("run", "--name", "exp", SCRIPT, *ARGS, FLOR_EPSILON="1e9")  # segments split 3 + 3


def test_probed_block_over_two_ray_tasks_equals_full_run(flor_env: Flor, ray_head: str) -> None:
    f = flor_env
    record(f)
    truth = f.truth(edited(f), *ARGS)
    out = f.cli(
        "replay", "--name", "exp", "--workers", "2", "--backend", "ray", "--address", ray_head
    )
    assert out.stdout == truth
    assert "segment 1/2 done" in out.stderr and "segment 2/2 done" in out.stderr


def test_killed_task_is_retried_and_output_is_complete(
    flor_env: Flor, ray_head: str, tmp_path: Path
) -> None:
    """The segment's process kills its Ray worker, then itself, once, in epoch 5."""
    f = flor_env
    record(f)
    once = tmp_path / "killed-once"
    kill = (
        f"if epoch == 5 and not os.path.exists({str(once)!r}): "
        f"open({str(once)!r}, 'w').close(); os.kill(os.getppid(), 9); os.kill(os.getpid(), 9)"
    )
    script = edited(f, kill)
    once.touch()
    truth = f.truth(script, *ARGS)
    once.unlink()
    out = f.cli(
        "replay", "--name", "exp", "--workers", "2", "--backend", "ray", "--address", ray_head
    )
    assert once.exists()  # it was killed once
    assert out.stdout == truth


def test_a_segment_that_keeps_failing_is_reported_and_the_rest_kept(
    flor_env: Flor, ray_head: str
) -> None:
    f = flor_env
    record(f)
    edited(f, "assert epoch != 6, 'boom in epoch 6'")
    out = f.cli(
        "replay", "--name", "exp", "--workers", "2", "--backend", "ray", "--address", ray_head,
        check=False,
    )  # fmt: skip
    assert out.returncode == 1
    assert "segment 2/2 failed" in out.stderr and "boom in epoch 6" in out.stderr
    assert "segment 1/2 done" in out.stderr
    truth = f.truth(edited(f), *ARGS)
    assert out.stdout == truth[: truth.index("  train epoch 4 ")]  # segment 1's epochs 1-3


def test_runs_at_their_own_versions_as_ray_tasks(flor_env: Flor, ray_head: str) -> None:
    """``--runs`` on Ray: one task per run, each version's files shipped (a project file
    included)."""
    from test_across_versions import by_hand, sections, write_version

    f = flor_env
    f.extra.update(NO_TOKEN)
    for k in (4, 5):
        write_version(f.work, k)
        f.cli("run", "--name", "mv", "train.py", FLOR_EPSILON="1e9")
    ids = [p.name for p in sorted((f.home / "mv").iterdir())]
    truths = {ids[0]: by_hand(f, 4), ids[1]: by_hand(f, 5)}
    write_version(f.work, 5, "outside")
    out = f.cli(
        "replay", "--name", "mv", "--runs", "all", "--workers", "2",
        "--backend", "ray", "--address", ray_head,
    )  # fmt: skip
    assert sections(out.stdout) == truths
    assert f"run {ids[0]} (version " in out.stderr and "2 of 2 runs replayed" in out.stderr
