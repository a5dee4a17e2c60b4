"""Segments from a scheduler's environment: Slurm array tasks and torchrun ranks."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Flor

from flor.errors import FlorError
from flor.replay.segments import segment_from_env

SCRIPT = "finetune_frozen.py"


@pytest.mark.parametrize(
    ("env", "segment", "replay_id"),
    [
        ({"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5",
          "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_JOB_ID": "42"}, "3/4", "slurm-42"),
        ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"}, "1/2", None),
        ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2",
          "SLURM_ARRAY_TASK_COUNT": "3"}, "3/3", None),
        ({"RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "abc"}, "2/4", "torchrun-abc"),
    ],
)  # fmt: skip
def test_segment_from_scheduler_env(env: dict[str, str], segment: str, replay_id: str) -> None:
    assigned = segment_from_env(env, ranks=True)
    assert assigned is not None
    assert (assigned.segment, assigned.replay_id) == (segment, replay_id)


def test_no_scheduler_no_segment() -> None:
    assert segment_from_env({"RANK": "1"}, ranks=True) is None  # RANK alone is not torchrun


def test_torchrun_ranks_are_segments_only_when_asked() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "abc"}
    assert segment_from_env(env) is None  # a distributed job's ranks, not segments


@pytest.mark.parametrize(
    "env",
    [
        {"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "4"},
        {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "4"},
        {"RANK": "4", "WORLD_SIZE": "4"},
    ],
)
def test_bad_scheduler_env_is_a_user_error(env: dict[str, str]) -> None:
    with pytest.raises(FlorError):
        segment_from_env(env, ranks=True)


def record(f: Flor) -> None:
    """Record the script with a checkpoint every iteration (every segment can start)."""
    f.copy(f"plain/{SCRIPT}", as_name=SCRIPT)
    f.cli("run", "--name", "ft", SCRIPT, FLOR_EPSILON="1e9")


@pytest.mark.slow
def test_slurm_array_tasks_each_replay_their_segment(flor_env: Flor) -> None:
    f = flor_env
    record(f)
    truth = f.truth(f.copy(f"plain/{SCRIPT}", "outside", as_name=SCRIPT))
    array = {"SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"}
    printed = []
    for task in ("1", "2", "3"):
        out = f.cli("replay", "--name", "ft", SLURM_ARRAY_TASK_ID=task, **array)
        assert f"replaying segment {task}/3 (from SLURM_ARRAY_TASK_ID" in out.stderr
        printed.append(out.stdout)
    segments = sorted(f.replays("ft"), key=lambda r: r["segment"])
    assert [r["segment"] for r in segments] == [[1, 3], [2, 3], [3, 3]]
    assert [r["iterations"] for r in segments] == [[0, 1], [2, 3], [4, 5]]
    assert all(f"epoch {2 * i + 1} loss" in printed[i] for i in range(3))  # its own epochs
    assert all(f"epoch {2 * i + 2} loss" not in printed[i] for i in range(2))  # no more
    assert f.cli("output", "ft", "--replay", "slurm-77").stdout == truth
    assert f.cli("output", "ft").stdout == truth  # the latest replay


@pytest.mark.slow
def test_output_of_an_incomplete_array_names_the_missing_segment(flor_env: Flor) -> None:
    f = flor_env
    record(f)
    f.cli(
        "replay", "--name", "ft", "--segment-from-env",
        RANK="0", WORLD_SIZE="2", TORCHELASTIC_RUN_ID="r1",
    )  # fmt: skip
    out = f.cli("output", "ft", check=False)
    assert out.returncode == 2
    assert "replay torchrun-r1 lacks segment(s) 2 of 2" in out.stderr


@pytest.mark.slow
def test_ray_mistakes_are_one_line_errors(flor_env: Flor, tmp_path: Path) -> None:
    f = flor_env
    record(f)
    fake = tmp_path / "no-ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    out = f.cli(
        "replay", "--name", "ft", "--workers", "2", "--backend", "ray",
        check=False, PYTHONPATH=str(fake.parent),
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        "flor: error: --backend ray needs Ray on this machine: pip install 'flor[ray]'"
    )
    missing = f.cli("replay", "--name", "ft", "--backend", "ray", check=False)
    assert missing.returncode == 2 and "--workers K" in missing.stderr
    alone = f.cli("replay", "--name", "ft", "--address", "127.0.0.1:1", check=False)
    assert alone.returncode == 2 and "add --backend ray" in alone.stderr
    nobody = f.cli(
        "replay", "--name", "ft", "--workers", "2", "--backend", "ray", "--address", "127.0.0.1:1",
        check=False,
    )  # fmt: skip
    assert nobody.returncode == 2
    assert nobody.stderr.strip().splitlines()[-1].startswith("flor: error: no Ray head answers")
