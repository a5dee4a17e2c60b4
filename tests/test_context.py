from __future__ import annotations

import pytest

from flor.errors import FlorError
from flor.runtime.context import (
    Options,
    options_from_env,
    options_from_legacy,
    parse_segment,
    strip_legacy_flags,
)


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


def test_bare_replay_flor_takes_its_segment_from_a_slurm_array(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = {"name": "e", "segment": ""}
    assert options_from_legacy(found, Options(), "/x/t.py").segment == (1, 1)
    for key, value in {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1",
                       "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_JOB_ID": "9"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    opts = options_from_legacy(found, Options(), "/x/t.py")
    assert (opts.segment, opts.replay_id) == ((2, 3), "slurm-9")
    explicit = options_from_legacy({"name": "e", "segment": "1/2"}, Options(), "/x/t.py")
    assert explicit.segment == (1, 2)  # an explicit segment wins


def test_options() -> None:
    opts = options_from_legacy({"name": "e", "segment": "2/4"}, Options(), "/x/t.py")
    assert (opts.mode, opts.segment, opts.script) == ("replay", (2, 4), "/x/t.py")
    env = {"FLOR_MODE": "record", "FLOR_NAME": "n", "FLOR_EPSILON": "0.5"}
    assert options_from_env(env).epsilon == 0.5
    assert options_from_env({}).mode == "off"
    with pytest.raises(FlorError):
        options_from_env({"FLOR_MODE": "record"})
    with pytest.raises(FlorError, match="positive"):
        options_from_env({"FLOR_EPSILON": "-1"})
    with pytest.raises(FlorError, match="outside 1..2"):
        parse_segment("3/2")
