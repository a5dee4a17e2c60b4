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


CALLBACKS = """
import torch

def collate(batch):
    return batch

def on_end(trainer):
    print(trainer)

class Trainer:
    def set_callback(self, event, fn):
        self.fn = fn

    def run(self):
        for step in flor.it(range(3)):
            if flor.SkipBlock.step_into("b"):
                loader = torch.utils.data.DataLoader([], collate_fn=collate)
            flor.SkipBlock.end(self)
            self.fn(self)

Trainer().set_callback("end", on_end)
"""


@pytest.mark.parametrize(
    ("ran", "touched"), [(frozenset(), False), (frozenset({"on_end"}), True), (None, True)]
)
def test_a_callback_handed_to_the_project_counts_where_the_recording_saw_it_run(
    ran: frozenset[str] | None, touched: bool
) -> None:
    """``on_end`` is handed to the project's own ``set_callback``: ``flor run`` notes which
    blocks run it, and replay counts it in those only (without notes: in every block).
    ``collate`` goes to a library's DataLoader, where flor cannot note it: every block."""
    from flor.transform.fingerprints import Seen, handed_functions

    assert handed_functions({"t.py": CALLBACKS}) == {"on_end": "set_callback"}
    seen = None if ran is None else Seen(frozenset({"on_end"}), {"b": ran})
    edited = CALLBACKS.replace("print(trainer)", "print(trainer, 1)")
    assert ("b" in compare(CALLBACKS, edited, seen=seen).changed) is touched
    collated = CALLBACKS.replace("return batch", "return batch[::-1]")
    assert "b" in compare(CALLBACKS, collated, seen=seen).changed
    registered = CALLBACKS.replace('set_callback("end"', 'set_callback("start"')
    assert "b" in compare(CALLBACKS, registered, seen=seen).changed  # what runs where changed
