"""The recorder's parts, in-process: clock, writer, checkpointer, journal; and the start-up
allowance of a loop of no length, end to end."""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import Flor

from flor import runs
from flor.replay.loader import CheckpointLoader
from flor.runs.records import Commit, LoopEnd, RunMeta
from flor.runtime.checkpoints.checkpointer import Checkpointer
from flor.runtime.checkpoints.clock import IterationClock
from flor.runtime.checkpoints.interference import Interference, spare_core
from flor.runtime.checkpoints.writer import BackgroundWriter
from flor.runtime.journal.run_journal import RunJournal
from flor.store import LocalStore


def test_the_clock_leaves_flor_s_own_time_out_of_training_time() -> None:
    clock = IterationClock()  # the times its callers read, given: no sleeping on a busy host
    clock.turn(None, 99.9, 100.0)  # the first iteration begins at 100.0
    clock.stalled(0.015)
    clock.end_iteration(0, 100.02)
    clock.turn(None, 100.02, 100.03)  # ended already (journaled): the next begins
    clock.turn(1, 100.05, 100.06)  # one call ends it and begins the next
    timings, blocks = clock.take()
    assert abs(timings[0] - 0.005) < 1e-3 and abs(timings[1] - 0.02) < 1e-3 and blocks == {}
    assert abs(clock.compute - 0.025) < 1e-3
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


def test_jobs_run_in_order_on_the_writer_s_thread_each_charged() -> None:
    """Every job runs on the writer's thread (FIFO: a job submitted behind a queued one
    waits its turn), charged its cost; ``idle`` says whether any is still queued."""
    charged: list[int] = []
    writer = BackgroundWriter(lambda g, s: charged.append(g), print)
    here = threading.get_ident()
    assert writer.idle
    gate = threading.Event()
    large = writer.submit(2, lambda: (gate.wait(5), threading.get_ident())[1], nbytes=101)
    behind = writer.submit(3, threading.get_ident, nbytes=0)
    assert not writer.idle
    gate.set()
    writer.flush()
    assert writer.idle
    writer.close()
    assert large.result() == behind.result() != here
    assert charged == [2, 3], "every job's cost is charged"


def test_a_checkpoint_the_writer_has_no_room_for_is_skipped_not_waited_for(
    tmp_path: Path,
) -> None:
    """Snapshots in flight are bounded: while the writer still holds a block's last one and
    another as large would pass the bound, ``fits`` says no (the recorder then skips that
    checkpoint and counts it) instead of the training thread waiting for the writer."""
    writer = BackgroundWriter(lambda g, s: None, print, max_bytes=300_000)
    checkpointer = Checkpointer(LocalStore(tmp_path), "exp/r1", writer)
    state = {"big": torch.zeros(256, 256)}  # 256 KiB a snapshot
    assert checkpointer.fits(("b", 0)), "a block of unknown size: the writer's submit bounds it"
    gate = threading.Event()
    writer.submit(-1, lambda: gate.wait(5))  # the writer is busy
    checkpointer.take(0, ("b", 0), (), state, sys._getframe())
    assert not checkpointer.fits(("b", 0)) and checkpointer.fits(("other", 0))
    gate.set()
    writer.flush()
    assert checkpointer.fits(("b", 0))
    writer.close()


def _switches_beside_checkpoint_writes(root: Path) -> int:
    """How often a loop of short torch calls gives up the CPU (a wait at the GIL, mostly)
    while 20 checkpoints of many small values are written. Each is taken with the writer
    idle: on a slow or busy host the writer may still be writing the last one, and a
    checkpoint taken then is encoded whole on the writer by design (CI saw 828)."""
    writer = BackgroundWriter(lambda g, s: None, print)
    checkpointer = Checkpointer(LocalStore(root), "exp/r1", writer)
    net = torch.nn.Linear(8, 64)
    log = [torch.zeros(4) for _ in range(1000)]  # Python work to write
    big = torch.zeros(256, 256)  # 256 KiB that changes: a pack to hash and write
    switches = 0
    for g in range(20):
        writer.flush()  # idle, as a checkpoint's usual turn finds it (not counted: a wait)
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
        big += 1
        checkpointer.take(g, ("b", 0), (), {"net": net, "log": log, "big": big}, sys._getframe())
        for _ in range(300):  # short calls, each of which lets another thread in
            net(torch.randn(16, 8))
        switches += resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before
    writer.close()
    return switches


@pytest.mark.skipif(not hasattr(resource, "RUSAGE_THREAD"), reason="Linux counts a thread's")
def test_a_small_checkpoint_s_writer_spares_the_loop_its_turns_at_the_gil(
    tmp_path: Path,
) -> None:
    """Serialized by a writer thread on a free core, each of these checkpoints made the loop
    beside it wait at the GIL about 600 times (12,500-12,900 for the 20, on this host's
    idle cores). Serialized on the training thread, with only the hashing and writing left
    to the writer (which release the GIL), the loop waits about 30 times a checkpoint
    (560-830 for the 20: once each time the writer takes the GIL back after a hash or a
    system call)."""
    assert _switches_beside_checkpoint_writes(tmp_path) < 100 * 20


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


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_the_writer_is_charged_what_the_training_thread_lost_beyond_its_usual_rate() -> None:
    """While the writer works, the training thread's off-CPU time is what it cost training,
    less the share the thread is usually off its CPU (a loop that waits on its data)."""
    interference = Interference()
    _spin(0.1)  # idle writer, a loop on its CPU: usually never off it
    interference.begin()
    assert interference.watching
    _spin(0.1)  # on its CPU while the writer works: it lost nothing
    assert interference.end() < 0.06 and not interference.watching
    _spin(0.1)
    interference.begin()
    time.sleep(0.1)  # off its CPU while the writer works (a wait at the GIL, a core taken)
    assert interference.end() > 0.06
    time.sleep(0.1)  # a loop that is usually off its CPU half the time, by itself
    _spin(0.1)
    interference.begin()
    time.sleep(0.1)
    _spin(0.1)
    assert interference.end() < 0.06, "its own waits are not the writer's doing"
    assert interference.end() == 0.0, "nothing to charge when the writer was not watched"


def test_a_spare_core_is_one_torch_does_not_use() -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert spare_core(1) == (cores is not None and cores > 1)
    assert not spare_core(4096)


QUICK_STEPS = """
import torch

import flor

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in flor.it(range(3000)):
    if flor.SkipBlock.step_into("update"):
        loss = model(torch.randn(2, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model, opt = flor.SkipBlock.end(model, opt)
    if step % 500 == 0:
        print(step, round(float(loss), 6))
"""


def test_a_block_after_a_stretch_of_fast_iterations_is_its_iteration_s_first(
    flor_env: Flor,
) -> None:
    """Most iterations of a loop of short steps take the recorder's fast lane, which counts
    no block occurrences. The iteration after such a stretch that takes a checkpoint labels
    its block as the iteration's first (``update/0``), the label replay restores by; and its
    counters and timings are journaled for every iteration, compactly."""
    script = flor_env.work / "quick.py"
    script.write_text(QUICK_STEPS)
    flor_env.python(script, "--flor", "quick")
    run = runs.load_run(LocalStore(flor_env.home), "quick")
    taken = sorted(run.commits)
    assert len(taken) >= 2 and any(b - a > 1 for a, b in zip(taken, taken[1:])), taken
    labels = {label for g in taken for label in run.commits[g].blocks}
    assert labels == {"update/0"}
    assert sorted(run.timings) == list(range(3000))
    assert all(run.scalars[g].get("@") == 0 for g in run.scalar_firsts)
