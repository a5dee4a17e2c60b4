"""The recorder's parts, in-process: clock, writer, checkpointer, journal; and the start-up
allowance of a loop of no length, end to end."""

from __future__ import annotations

import resource
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import Flor

from flor import runs
from flor.replay.loader import CheckpointLoader
from flor.runs.records import Commit, LoopEnd, RunMeta
from flor.runtime.checkpoints.checkpointer import Checkpointer
from flor.runtime.checkpoints.clock import IterationClock
from flor.runtime.checkpoints.writer import INLINE_BYTES, BackgroundWriter
from flor.runtime.journal.run_journal import RunJournal
from flor.store import LocalStore


def test_the_clock_leaves_flor_s_own_time_out_of_training_time() -> None:
    clock = IterationClock()  # the times its callers read, given: no sleeping on a busy host
    clock.begin_iteration(100.0)
    clock.stalled(0.015)
    clock.end_iteration(0, 100.02)
    timings, blocks = clock.take()
    assert abs(timings[0] - 0.005) < 1e-3 and blocks == {}
    assert clock.take() == ({}, {}), "taken once, for one journal entry"


def test_a_failed_job_fails_its_iteration_and_its_commit_is_dropped() -> None:
    warnings: list[str] = []
    writer = BackgroundWriter(lambda g, s: None, warnings.append)

    def disk_full() -> None:
        raise OSError("No space left on device")

    data = writer.submit(3, disk_full)
    commit = writer.submit(3, lambda: "committed", commit=True)
    later = writer.submit(4, lambda: "fine", commit=True)
    writer.close()
    assert isinstance(data.exception(), OSError) and commit.cancelled()
    assert later.result() == "fine"
    assert warnings == [
        "checkpoint of iteration 3 skipped: No space left on device",
        "checkpoint of iteration 3 not committed; replay re-executes it",
    ]


def test_a_failed_journal_entry_does_not_stop_the_next_ones() -> None:
    warnings: list[str] = []
    writer = BackgroundWriter(lambda g, s: None, warnings.append)

    def disk_full() -> None:
        raise OSError("No space left on device")

    failed = writer.submit(-1, disk_full)  # a journal entry of no checkpoint
    later = writer.submit(-1, lambda: "loop end written")
    writer.close()
    assert isinstance(failed.exception(), OSError) and later.result() == "loop end written"
    assert warnings == ["journal entry not written: No space left on device"]


def test_a_small_job_runs_on_the_caller_s_thread_and_a_large_one_in_the_background() -> None:
    """Small jobs run inline (no turns at the GIL with the training loop), charged the same;
    a job submitted behind a queued one waits its turn on the writer's thread (FIFO)."""
    charged: list[int] = []
    writer = BackgroundWriter(lambda g, s: charged.append(g), print, inline_bytes=100)
    here = threading.get_ident()
    small = writer.submit(1, threading.get_ident, nbytes=100)
    assert small.done() and small.result() == here and writer.inline_seconds > 0
    commit = writer.submit(1, threading.get_ident, commit=True)  # waits on the disk: never
    assert commit.result() != here
    gate = threading.Event()
    large = writer.submit(2, lambda: (gate.wait(5), threading.get_ident())[1], nbytes=101)
    behind = writer.submit(3, threading.get_ident, nbytes=0)  # small, but queued behind
    gate.set()
    writer.close()
    assert large.result() == behind.result() != here
    assert charged == [1, 1, 2, 3], "every job's cost is charged, wherever it ran"


def _switches_beside_inline_writes(root: Path) -> int:
    """How often a loop of short torch calls gives up the CPU (a wait at the GIL, mostly)
    while 20 checkpoints of many small values are written."""
    writer = BackgroundWriter(lambda g, s: None, print, inline_bytes=INLINE_BYTES)
    checkpointer = Checkpointer(LocalStore(root), "exp/r1", writer)
    net = torch.nn.Linear(8, 64)
    log = [torch.zeros(4) for _ in range(1000)]  # Python work to write
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    for g in range(20):
        checkpointer.take(g, ("b", 0), (), {"net": net, "log": log}, sys._getframe())
        for _ in range(300):  # short calls, each of which lets another thread in
            net(torch.randn(16, 8))
    writer.flush()
    switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before
    writer.close()
    return switches


@pytest.mark.skipif(not hasattr(resource, "RUSAGE_THREAD"), reason="Linux counts a thread's")
def test_a_small_checkpoint_written_inline_spares_the_loop_its_turns_at_the_gil(
    tmp_path: Path,
) -> None:
    """Written by a writer thread on a free core, each of these checkpoints makes the loop
    beside it wait at the GIL about 600 times (12,500-12,900 for the 20, on this host's
    idle cores; far fewer where the writer finds no free core, which is why that side is
    not asserted). Written inline, the loop waits a few times a checkpoint (85 in all)."""
    assert _switches_beside_inline_writes(tmp_path) < 10 * 20


def test_a_checkpoint_is_written_in_the_background_and_reads_back(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    writer = BackgroundWriter(lambda g, s: None, lambda message: None)
    model = torch.nn.Linear(3, 2)
    step, last_loss = 7, torch.tensor(0.5)  # a local the scope capture keeps
    taken = Checkpointer(store, "exp/r1", writer).take(
        2, ("train", 0), (model,), {"step": step}, sys._getframe()
    )
    written = taken.result(timeout=30)
    writer.close()
    entry = written.entry
    assert entry.key == "exp/r1/ckpt/00000002.train.0.pt" and entry.objs == 1
    assert "step" in (entry.holds or ()) and "last_loss" in (entry.holds or ())
    tree = CheckpointLoader(store, []).get(entry)
    assert torch.equal(tree["objs"][0]["v"]["weight"], model.weight.detach())
    assert written.logical >= entry.bytes > 0 and last_loss.item() == 0.5


def test_the_journal_writes_what_the_catalogue_reads(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    journal = RunJournal(store, "exp/r1")
    journal.start(RunMeta(name="exp", run_id="r1", argv=("t.py",)), "print(1)\n", None)
    journal.commit(Commit(0, {}, {"0": "a\n"}, {0: 0.5}, {0: 0.25}), [{"iteration": 0}])
    journal.end_loop(LoopEnd(0, 0, 2, "exhausted", {}, {1: 0.5}, {}), [])
    journal.finish(RunMeta(name="exp", run_id="r1", status="finished"), {"pre": "", "post": ""})
    run = runs.load_run(store, "exp")
    assert run.meta.status == "finished" and run.source == "print(1)\n"
    assert run.iterations == 2 and run.complete and run.timings == {0: 0.5, 1: 0.5}
    assert run.commits == {}, "a commit without blocks holds no checkpoint"
    assert (tmp_path / "exp/r1/logs/00000000.jsonl").exists()


UNBOUNDED = """
import itertools
import time

import torch

import flor

time.sleep(3.0)  # the script's own start-up: loading data, building a model
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in flor.it(itertools.count()):
    if flor.SkipBlock.step_into("step"):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model, opt = flor.SkipBlock.end(model, opt)
    if step == 49:
        break
"""


def test_a_loop_of_no_length_spreads_its_start_up_allowance_over_the_last_run_s_length(
    flor_env: Flor,
) -> None:
    """``count()`` has no ``len()``: the first run of it is allowed its start-up only as fast
    as it trains (``STARTUP_RATE`` times), a fraction of it in a loop this short; the next one
    takes the loop's length from it and is allowed all of it, spread over the whole loop."""
    f = flor_env
    script = f.work / "unbounded.py"
    script.write_text(UNBOUNDED)
    for _ in range(2):
        f.python(script, "--flor", "cnt")
    store = LocalStore(str(f.home))
    first, second = (runs.load_run(store, "cnt", r) for r in runs.list_runs(store, "cnt"))
    assert second.meta.budgeted_seconds >= 3.0  # the script's own start-up, at least
    assert second.meta.budgeted_seconds > 1.5 * first.meta.budgeted_seconds, (
        first.meta.budgeted_seconds,
        first.meta.compute_seconds,
    )
    assert max(second.commits) >= 40  # spread over the loop, not spent at its start
