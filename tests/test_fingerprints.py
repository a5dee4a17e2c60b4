from __future__ import annotations

import pytest

from flor.errors import FlorError
from flor.transform import compare, fingerprints

SCRIPT = """
import flor

def helper(x):
    return x + 1

def train(model):
    return helper(model)

for e in flor.it(range(3)):
    if flor.SkipBlock.step_into("train"):
        train(e)
    flor.SkipBlock.end()
    print(e)
"""


def test_edits_outside_blocks_do_not_probe() -> None:
    edited = SCRIPT.replace("    print(e)", "    print(e)\n    print('more')  # new\n")
    assert compare(SCRIPT, edited).changed == frozenset()


def test_edits_inside_block_or_called_functions_probe() -> None:
    assert compare(
        SCRIPT, SCRIPT.replace("train(e)\n", "train(e)\n        print(1)\n")
    ).changed == {"train"}
    assert compare(SCRIPT, SCRIPT.replace("x + 1", "print(x) or x + 1")).changed == {"train"}


def test_formatting_and_comments_do_not_probe() -> None:
    edited = SCRIPT.replace("train(e)", "train( e )  # comment")
    assert compare(SCRIPT, edited).changed == frozenset()


def test_renamed_and_syntax_errors() -> None:
    changes = compare(SCRIPT, SCRIPT.replace('"train"', '"fit"'))
    assert changes.missing == {"train"} and changes.added == {"fit"}
    with pytest.raises(FlorError, match=r"t.py:2:\d+: cannot parse"):
        fingerprints("x = 1\ndef (:\n", "t.py")


@pytest.mark.parametrize("spawn", ["mp.spawn(worker, nprocs=2)", "mp.spawn(fn=worker, nprocs=2)"])
def test_the_function_mp_spawn_runs_is_called_not_passed_around(spawn: str) -> None:
    """An edit after the block in the spawned function probes nothing; one inside does."""
    source = f"""
import flor
import torch.multiprocessing as mp

def worker(rank):
    for epoch in flor.it(range(3)):
        if flor.SkipBlock.step_into("worker.L0"):
            step()
        flor.SkipBlock.end()
        print(epoch)

{spawn}
"""
    outside = source.replace("print(epoch)", "print(epoch, 'more')")
    inside = source.replace("step()", "step(); print('in')")
    assert compare(source, outside).changed == frozenset()
    assert compare(source, inside).changed == {"worker.L0"}
