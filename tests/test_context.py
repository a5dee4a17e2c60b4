from __future__ import annotations

import pytest

from flor.errors import FlorError
from flor.inputs import parse_segment
from flor.launch.start import legacy_options, strip_legacy_flags
from flor.store import StoreSettings


@pytest.mark.parametrize(
    ("argv", "kept", "found"),
    [
        (["t.py", "--flor", "exp", "8"], ["t.py", "8"], {"name": "exp"}),
        (["t.py", "--lr", "1", "--flor=exp"], ["t.py", "--lr", "1"], {"name": "exp"}),
        (
            ["t.py", "--flor", "e", "--replay_flor", "2/3", "x"],
            ["t.py", "x"],
            {"name": "e", "segment": "2/3"},
        ),
        (
            ["t.py", "--flor", "e", "--replay_flor", "8"],
            ["t.py", "8"],
            {"name": "e", "segment": ""},
        ),
        (
            ["t.py", "--flor", "e", "--replay_flor", "--x"],
            ["t.py", "--x"],
            {"name": "e", "segment": ""},
        ),
        (["t.py", "plain"], ["t.py", "plain"], {}),
    ],
)
def test_strip_legacy_flags(argv: list[str], kept: list[str], found: dict[str, str]) -> None:
    assert strip_legacy_flags(argv) == (kept, found)


def test_legacy_flags_errors() -> None:
    with pytest.raises(FlorError, match="needs a run name"):
        strip_legacy_flags(["t.py", "--flor"])
    with pytest.raises(FlorError, match="needs --flor NAME"):
        strip_legacy_flags(["t.py", "--replay_flor"])


def test_bare_replay_flor_takes_its_segment_from_a_slurm_array() -> None:
    found = {"name": "e", "segment": ""}
    assert legacy_options(found, {}, "/x/t.py").segment == (1, 1)
    slurm = {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1",
             "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_JOB_ID": "9"}  # fmt: skip
    opts = legacy_options(found, slurm, "/x/t.py")
    assert (opts.segment, opts.replay_id) == ((2, 3), "slurm-9")
    explicit = legacy_options({"name": "e", "segment": "1/2"}, slurm, "/x/t.py")
    assert explicit.segment == (1, 2)  # an explicit segment wins


def test_legacy_options_read_the_documented_variables() -> None:
    opts = legacy_options({"name": "e", "segment": "2/4"}, {}, "/x/t.py")
    assert (opts.mode, opts.segment, opts.script) == ("replay", (2, 4), "/x/t.py")
    env = {"FLOR_EPSILON": "0.5", "FLOR_ITERATIONS": "0-4,10"}
    opts = legacy_options({"name": "n"}, env, "/x/t.py")
    assert (opts.mode, opts.epsilon, opts.iterations) == ("record", 0.5, "0-4,10")
    with pytest.raises(FlorError, match="positive"):
        legacy_options({"name": "n"}, {"FLOR_EPSILON": "-1"}, "/x/t.py")
    with pytest.raises(FlorError, match="outside 1..2"):
        parse_segment("3/2")
    with pytest.raises(FlorError, match="1/0: a replay splits into at least 1 segment"):
        parse_segment("1/0")


def test_store_settings_read_the_documented_variables() -> None:
    env = {"FLOR_HOME": "/h", "FLOR_STORE": "s3://b/p", "FLOR_CACHE": "/c",
           "FLOR_UPLOAD_TIMEOUT": "7"}  # fmt: skip
    assert StoreSettings.from_env(env) == StoreSettings("/h", "s3://b/p", "/c", 7.0)
    assert StoreSettings.from_env({"FLOR_HOME": "/h"}).default_url == "/h"
    with pytest.raises(FlorError, match="FLOR_UPLOAD_TIMEOUT"):
        StoreSettings.from_env({"FLOR_UPLOAD_TIMEOUT": "soon"})
