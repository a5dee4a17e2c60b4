"""Unmodified scripts: instrument, record, edit, re-instrument, replay; compare with full runs.

The user edits the *original* script (hindsight prints inside or outside the
training); ground truth is a plain ``python`` run of that edited original.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, hindsight

from flor.transform import instrument

pytestmark = pytest.mark.slow

PLAIN = SCRIPTS / "plain"
REFUSED = {"hogwild.py", "no_training.py"}
RUNNABLE = sorted(p.name for p in PLAIN.glob("*.py") if p.name not in REFUSED)


def _instrumented(f: Flor, name: str, kind: str) -> tuple[Path, Path]:
    """Write the edited original and its instrumented form; return both paths."""
    source = hindsight((PLAIN / name).read_text(), kind)
    original = f.work / f"original_{name}"
    original.write_text(source)
    result = instrument(source, name)
    assert result.changed and not result.error, result.report()
    inst = f.work / name
    inst.write_text(result.source)
    return original, inst


# test_run_replay records and replays these five through `flor run`, both edits each.
THROUGH_FLOR_RUN = {
    "module_globals.py",
    "reinforce.py",
    "train_function.py",
    "trainer_class.py",
    "while_true_steps.py",
}


@pytest.mark.parametrize("name", [n for n in RUNNABLE if n not in THROUGH_FLOR_RUN])
def test_instrumented_script_records_and_replays(flor_env: Flor, name: str) -> None:
    f = flor_env
    _, inst = _instrumented(f, name, "none")
    recorded = f.python(inst, "--flor", "exp", FLOR_EPSILON="1e9")
    for kind in ("outside", "inside"):
        if f"# @{kind}:" not in (PLAIN / name).read_text():
            continue
        original, inst = _instrumented(f, name, kind)
        truth = f.truth(original)
        # The unedited original prints the edit's truth less the edit's own lines; so must the
        # record (a plain run of the unedited original would say so for one more process).
        added = _printed_prefixes((PLAIN / name).read_text(), kind)
        assert _less(truth, added) == _less(recorded.stdout, added), "the record prints otherwise"
        replayed = f.python(inst, "--flor", "exp", "--replay_flor")
        assert replayed.stdout == truth, f"{kind} edit"
        assert bool(f.replays("exp")[-1]["probed"]) == (kind == "inside")


def _printed_prefixes(source: str, kind: str) -> tuple[str, ...]:
    """How each line the ``kind`` edit prints starts: its f-string's text before any ``{``."""
    marks = re.findall(rf'# @{kind}: print\(f?"([^"{{]+)', source)
    assert marks, "each edit prints a line that starts with text"
    return tuple(marks)


def _less(printed: str, prefixes: tuple[str, ...]) -> list[str]:
    return [line for line in printed.splitlines() if not line.startswith(prefixes)]


# Segments of every shape are covered by test_fidelity and test_replay_e2e; here, the
# instrumented shapes whose segment boundaries are their own: early stopping, a trainer
# class, an episode loop.
# (test_run_replay segments the step loop, while_true_steps.py, through `flor run`.)
SEGMENTED = ["early_stopping.py", "reinforce.py", "trainer_class.py"]


@pytest.mark.parametrize("name", SEGMENTED)
def test_instrumented_segments_cover_the_run(flor_env: Flor, name: str) -> None:
    f = flor_env
    _, inst = _instrumented(f, name, "none")
    f.python(inst, "--flor", "exp")  # default, adaptive budget
    original, inst = _instrumented(f, name, "outside")
    truth = f.truth(original)
    outputs = [f.python(inst, "--flor", "exp", "--replay_flor", f"{i}/2").stdout for i in (1, 2)]
    segments = sorted(f.replays("exp"), key=lambda r: r["segment"])
    merged = segments[0]["output"].get("pre", "")
    for seg, printed in zip(segments, outputs):
        body = "".join(seg["output"].get(str(i), "") for i in seg["iterations"])
        merged += body
        assert printed.startswith(seg["output"].get("pre", "") + body)
    merged += segments[-1]["output"].get("post", "")
    assert merged == truth


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsafe_or_trainingless_scripts_are_left_unchanged(name: str) -> None:
    source = (PLAIN / name).read_text()
    result = instrument(source, name)
    assert result.source == source
    if name != "no_training.py":
        assert result.notes and "warning" in result.report()
