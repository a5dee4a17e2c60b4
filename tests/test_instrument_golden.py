"""Whole scripts as golden files (coverage.py's goldtest style).

A mismatch, or a missing golden file, fails and saves the actual output beside
the golden file as ``*.actual``; ``FLOR_UPDATE_GOLDEN=1 make test`` writes the
golden files instead.
"""

from __future__ import annotations

import os

import pytest
from conftest import ROOT, SCRIPTS, hindsight

from flor.transform import instrument

GOLDEN = ROOT / "tests" / "golden"
NAMES = sorted(p.name for p in (SCRIPTS / "plain").glob("*.py"))


@pytest.mark.parametrize("name", NAMES)
def test_golden(name: str) -> None:
    result = instrument(hindsight((SCRIPTS / "plain" / name).read_text(), "none"), name)
    actual = result.diff() + "".join(f"# {line}\n" for line in result.report().splitlines())
    golden = GOLDEN / f"{name}.diff"
    if os.environ.get("FLOR_UPDATE_GOLDEN"):
        golden.write_text(actual)
    if not golden.exists():
        (GOLDEN / f"{name}.actual").write_text(actual)
        pytest.fail(f"no golden file {golden}; FLOR_UPDATE_GOLDEN=1 writes it from {name}.actual")
    expected = golden.read_text()
    if actual != expected:
        (GOLDEN / f"{name}.actual").write_text(actual)
    assert actual == expected, f"see {golden}.actual; FLOR_UPDATE_GOLDEN=1 accepts it"
