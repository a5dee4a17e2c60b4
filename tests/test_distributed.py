"""torchrun jobs: recorded as one run, replayed in one process or with every rank in step.

Ground truth is the edited script run in full under torchrun (2 processes, gloo, CPU):
rank 0 prints, so its stdout is what the user sees.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Flor

from flor.errors import FlorError
from flor.replay.world import replay_world
from flor.runs.records import RunMeta
from flor.runtime.process.job import Feed, Job
from flor.transform.sharding import sharded_state

# One torchrun job at a time: two starting at once on this 2-core host have aborted a rank
# ("terminate called without an active exception") in plain runs without flor.
pytestmark = pytest.mark.xdist_group("torchrun")

SCRIPT = "ddp_train.py"
TORCHRUN = {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "h", "MASTER_PORT": "1"}


# -- which job, which world ------------------------------------------------------------
def test_a_job_is_what_torchrun_describes() -> None:
    job = Job.from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", **TORCHRUN})
    assert job is not None and (job.rank, job.world_size, job.port) == (1, 2, 1)
    assert Job.from_env({}) is None
    assert Job.from_env({"RANK": "0", "WORLD_SIZE": "1", **TORCHRUN}) is None  # one process
    with pytest.raises(FlorError, match="not by torchrun"):
        Job.from_env({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(FlorError, match="outside 0..1"):
        Job.from_env({"RANK": "2", "WORLD_SIZE": "2", **TORCHRUN})


def test_rank_0s_decisions_reach_the_other_ranks_ahead_and_in_order() -> None:
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    ranks = [Job(r, 2, r, 0, "127.0.0.1", server.port) for r in (0, 1)]
    ranks[0].publish("checkpoint/1", "1")  # before the other rank reads
    feed = ranks[1].feed("checkpoint", start=1)
    assert feed.get(1) == "1"
    for k, value in ((2, "0"), (3, "2"), (4, "1"), (5, Feed.END)):
        ranks[0].publish(f"checkpoint/{k}", value)
    ranks[0].close()
    deadline = time.monotonic() + 10
    while len(feed._values) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # read by the feed's own thread, before anyone asks
    assert [feed.get(k) for k in (2, 3, 4)] == ["0", "2", "1"]
    with pytest.raises(EOFError, match="rank 0 ended"):
        feed.get(5)


def test_the_replay_world_follows_the_record() -> None:
    single, double = RunMeta(name="n", run_id="r"), RunMeta(name="n", run_id="r", world_size=2)
    job = Job.from_env({"RANK": "1", "WORLD_SIZE": "2", **TORCHRUN})
    assert replay_world(single, None, None).world_size == 1
    alone = replay_world(double, None, 1)
    assert (alone.rank, alone.standin, alone.in_step) == (1, True, False)
    together = replay_world(double, job, None)
    assert (together.rank, together.standin, together.in_step) == (1, False, True)
    with pytest.raises(FlorError, match="--segment-from-env"):
        replay_world(single, job, None)  # a one-process run under torchrun: ask for segments
    with pytest.raises(FlorError, match="no rank 2"):
        replay_world(double, None, 2)
    three = Job.from_env({"RANK": "0", "WORLD_SIZE": "3", **TORCHRUN})
    with pytest.raises(FlorError, match="--nproc_per_node 2"):
        replay_world(double, three, None)


def test_sharded_training_is_found() -> None:
    fsdp = "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
    assert sharded_state(fsdp, "t.py") == "t.py:1: torch.distributed.fsdp"
    assert sharded_state("import torch.distributed.checkpoint as dcp\n", "t.py") is not None
    assert sharded_state("m = fully_shard(m)\n", "t.py") == "t.py:1: fully_shard"
    assert sharded_state("from torch.nn.parallel import DistributedDataParallel\n", "t.py") is None


def test_only_what_every_rank_committed_counts_and_gc_sees_every_rank(tmp_path: Path) -> None:
    from flor import runs
    from flor.runs import layout, retention
    from flor.runs.records import CheckpointEntry, Commit
    from flor.runtime.journal.run_journal import RunJournal
    from flor.store.local import LocalStore

    store = LocalStore(str(tmp_path))
    root = layout.run_prefix("ddp", "r1")
    for rank, iterations in ((0, [0, 1, 2]), (1, [0, 1])):  # rank 1 died before committing 2
        prefix = layout.rank_prefix(root, rank)
        journal = RunJournal(store, prefix)
        journal.start(RunMeta(name="ddp", run_id="r1", rank=rank, world_size=2), "src", None)
        for g in iterations:
            key = layout.ckpt_key(prefix, g, "b", 0)
            store.put(key, b"state")
            entry = CheckpointEntry(key, "sha", 5, blobs={f"blob-{rank}-{g}": 8})
            journal.commit(Commit(g, {"b/0": entry}), [])
    run = runs.load_run(store, "ddp")
    assert (sorted(run.commits), sorted(run.partial)) == ([0, 1], [2])
    other = runs.as_rank(run, 1)
    assert (other.rank, sorted(other.commits), [j.rank for j in other.others]) == (1, [0, 1], [0])
    assert "blob-1-1" in runs.referenced_blobs(run)  # kept while the run is
    assert "blob-0-2" in runs.referenced_blobs(run)  # committed by rank 0 only: still its data
    found = retention.collect(store, lambda r: True, checkpoints_only=True)
    assert set(found.keys) == {root, f"{root}/ranks/1"}  # every rank's checkpoints go
    with pytest.raises(FlorError, match="no rank 2"):
        runs.load_run(store, "ddp", rank=2)


# -- end to end, under torchrun ----------------------------------------------------------
@dataclass
class Recorded:
    f: Flor
    record: str  # what the recording printed (rank 0)
    outside: str  # a full run of the script edited outside the block
    inside: str  # and inside it


@pytest.fixture
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """One torchrun recording (a checkpoint every epoch), and the edited scripts' full runs."""
    root = tmp_path_factory.mktemp("ddp")
    (root / "work").mkdir()
    f = Flor(root / "home", root / "work")
    script = f"distributed/{SCRIPT}"
    f.copy(script, as_name=SCRIPT)
    record = f.torchrun("-m", "flor.cli", "run", "--name", "ddp", SCRIPT, FLOR_EPSILON="1e9")
    truths = {}
    for kind in ("outside", "inside"):
        truths[kind] = f.torchrun_truth(f.copy(script, kind, as_name=f"{kind}.py"))
    return Recorded(f, record.stdout, truths["outside"], truths["inside"])


def _a_torchrun_job_is_one_run_with_a_journal_per_rank(recorded: Recorded) -> None:
    f = recorded.f
    assert recorded.record.count("epoch 5 loss") == 1  # rank 0 printed, once
    rows = [line for line in f.cli("ls").stdout.splitlines() if line.startswith("ddp ")]
    assert len(rows) == 1
    assert "2 processes (torchrun)" in f.cli("show", "ddp").stdout
    run = f.latest_run("ddp")
    metas = [json.loads((p / "run.json").read_text()) for p in (run, run / "ranks" / "1")]
    assert [(m.get("rank", 0), m["world_size"]) for m in metas] == [(0, 2), (1, 2)]
    commits = [
        sorted(p.name for p in (j / "journal").glob("0*.json")) for j in (run, run / "ranks" / "1")
    ]
    assert commits[0] == commits[1] and len(commits[0]) == 6  # the same iterations, all of them


def _an_outside_edit_replays_in_one_process_as_rank_0(recorded: Recorded) -> None:
    f = recorded.f
    f.copy(f"distributed/{SCRIPT}", "outside", as_name=SCRIPT)
    out, backwards = f.counting_backwards("standin", ("replay", "--name", "ddp"))
    assert out.stdout == recorded.outside
    assert backwards == 0  # every epoch restored: no training step ran


def _an_inside_edit_needs_every_rank_and_replays_in_step(recorded: Recorded) -> None:
    f = recorded.f
    f.copy(f"distributed/{SCRIPT}", "inside", as_name=SCRIPT)
    alone = f.cli("replay", "--name", "ddp", check=False)
    assert alone.returncode == 2 and alone.stdout == ""
    assert (
        alone.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "needs all 2 processes of the recorded job: replay under torchrun --nproc_per_node 2 "
            "$(which flor) replay --name ddp"
        )
    )
    together = f.torchrun("-m", "flor.cli", "replay", "--name", "ddp")
    assert together.stdout == recorded.inside


def _a_collective_outside_the_blocks_is_refused_in_one_process(recorded: Recorded) -> None:
    f = recorded.f
    f.copy(f"distributed/{SCRIPT}", "collective", as_name=SCRIPT)
    alone = f.cli("replay", "--name", "ddp", check=False)
    assert alone.returncode == 2 and alone.stdout == ""  # nothing printed from one rank's sum
    assert (
        "calls torch.distributed.all_reduce in iteration 0 outside the restored blocks"
        in (alone.stderr.strip().splitlines()[-1])
    )


def _segments_under_torchrun_partition_the_iterations(recorded: Recorded) -> None:
    f = recorded.f
    f.copy(f"distributed/{SCRIPT}", "outside", as_name=SCRIPT)
    parts = [
        f.torchrun("-m", "flor.cli", "replay", "--name", "ddp", "--segment", f"{i}/2").stdout
        for i in (1, 2)
    ]
    assert "epoch 2 loss" in parts[0] and "epoch 3 loss" in parts[1]
    assert "".join(parts) == recorded.outside


def _a_killed_rank_leaves_a_run_replayable_to_what_every_rank_committed(
    recorded: Recorded, flor_env: Flor
) -> None:
    f = flor_env
    f.copy(f"distributed/{SCRIPT}", as_name=SCRIPT)
    killed = f.torchrun(
        "-m", "flor.cli", "run", "--name", "ddp", SCRIPT,
        check=False, FLOR_EPSILON="1e9", KILL_RANK="1",
    )  # fmt: skip
    assert killed.returncode != 0
    run = f.latest_run("ddp")
    committed = [
        {int(p.stem) for p in (j / "journal").glob("0*.json")} for j in (run, run / "ranks" / "1")
    ]
    everywhere = max(committed[0] & committed[1])
    # Rank 1 died at the start of epoch 3, a second after it began; on a loaded machine the
    # SIGKILL may still beat its writer to the commits of epochs 1-2 (seen in the suite), and
    # without the second, to epoch 0's (seen once): what every rank did commit replays.
    assert 0 <= everywhere <= 2
    f.copy(f"distributed/{SCRIPT}", "outside", as_name=SCRIPT)
    out = f.cli("replay", "--name", "ddp", "--iterations", f"0-{everywhere}")
    epochs = recorded.outside.splitlines(keepends=True)[: 2 * (everywhere + 1)]
    assert out.stdout == "".join(epochs)  # two lines per epoch


@pytest.mark.slow
def test_a_torchrun_job_records_one_run_and_replays_alone_or_in_step(
    recorded: Recorded, flor_env: Flor
) -> None:
    """Each check below on one recording: a recording and its ground truths cost three
    torchrun jobs, and separate tests would repeat them on each xdist worker."""
    _a_torchrun_job_is_one_run_with_a_journal_per_rank(recorded)
    _an_outside_edit_replays_in_one_process_as_rank_0(recorded)
    _an_inside_edit_needs_every_rank_and_replays_in_step(recorded)
    _a_collective_outside_the_blocks_is_refused_in_one_process(recorded)
    _segments_under_torchrun_partition_the_iterations(recorded)
    _a_killed_rank_leaves_a_run_replayable_to_what_every_rank_committed(recorded, flor_env)


@pytest.mark.slow
def test_sharded_training_is_refused_in_one_line(flor_env: Flor, tmp_path: Path) -> None:
    f = flor_env
    script = f.work / "fsdp.py"
    script.write_text(
        "import torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel\n"
        "for step in range(3):\n    print(step)\n"
    )
    out = f.cli("run", "--name", "fsdp", "fsdp.py", check=False)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines()[-1] == (
        "flor: error: fsdp.py:2: torch.distributed.fsdp: state sharded across ranks (FSDP, "
        "torch.distributed.checkpoint) cannot be recorded yet; run the script without flor"
    )
    assert not (f.home / "fsdp").exists()


@pytest.mark.slow
def test_a_sparse_edit_replays_in_step_only_what_some_rank_needs(flor_env: Flor) -> None:
    """A hindsight line in the step loop's eval branch, which only rank 0 takes. Checkpoints
    are kept on the eves of the evals only (the others thinned, as a budget would), so a
    dense replay would re-run almost every step; every rank runs what rank 0 needs, and
    nothing more, in step: their backward passes all-reduce."""
    f = flor_env
    script = "distributed/ddp_steps.py"
    f.copy(script, as_name="steps.py")
    f.torchrun("-m", "flor.cli", "run", "--name", "steps", "steps.py", FLOR_EPSILON="1e9")
    run = f.latest_run("steps")
    for journal in (run, run / "ranks" / "1"):
        for entry in (journal / "journal").glob("0*.json"):
            commit = json.loads(entry.read_text())
            if commit["iteration"] % 10 != 9:
                entry.write_text(json.dumps({**commit, "blocks": {}}))  # thinned: output kept
    truth = f.torchrun_truth(f.copy(script, "sparse", as_name="full.py"))
    f.copy(script, "sparse", as_name="steps.py")
    out, backwards = f.counting_backwards("in-step", ("replay", "--name", "steps"), torchrun=True)
    assert out.stdout == truth and "hindsight w" in truth
    # 41 steps on each rank in a full run; here the steps at 0 and 10, 20, 30, 40 (each after
    # the eve restored), on both ranks.
    assert backwards == 2 * 5, backwards


@pytest.mark.slow
def test_an_mp_spawn_script_records_its_ranks_and_replays_them(flor_env: Flor) -> None:
    f = flor_env
    script = "distributed/spawn_train.py"
    f.copy(script, as_name="spawn_train.py")
    f.cli("run", "--name", "spawned", "spawn_train.py", FLOR_EPSILON="1e9")
    assert "2 processes (mp.spawn)" in f.cli("show", "spawned").stdout
    truth = f.truth(f.copy(script, "outside", as_name="full.py"))
    f.copy(script, "outside", as_name="spawn_train.py")
    out, backwards = f.counting_backwards("spawned", ("replay", "--name", "spawned"))
    assert out.stdout == truth and "bias" in truth
    assert backwards == 0  # both ranks restored every epoch
    # An error in a spawned process is shown on the script's own lines, as python shows it.
    raising = f.copy(script, "raises", as_name="spawn_train.py").read_text().splitlines()
    line = next(i for i, text in enumerate(raising, 1) if "boom" in text)
    failed = f.cli("replay", "--name", "spawned", check=False)
    assert failed.returncode == 1
    assert f'spawn_train.py", line {line}, in main_worker\n    raise ValueError' in failed.stderr
    assert "ValueError: boom on rank 0" in failed.stderr


@pytest.mark.slow
def test_an_accelerate_script_records_one_run_and_replays_alone_or_in_step(
    flor_env: Flor,
) -> None:
    """accelerate's own objects, under torchrun: its state reads torchrun's variables (the
    stand-in gives a rank's view of them), its prepared loader's epoch count decides the next
    shuffle (a segment resumes it), its optimizer wraps the one the scheduler watches."""
    f = flor_env
    script = "distributed/accelerate_train.py"
    f.copy(script, as_name="acc.py")
    f.torchrun("-m", "flor.cli", "run", "--name", "acc", "acc.py", FLOR_EPSILON="1e9")
    truth = {
        k: f.torchrun_truth(f.copy(script, k, as_name=f"{k}.py")) for k in ("outside", "inside")
    }
    f.copy(script, "outside", as_name="acc.py")
    alone, backwards = f.counting_backwards("alone", ("replay", "--name", "acc"))
    assert alone.stdout == truth["outside"] and "  w " in alone.stdout
    assert backwards == 0 and "lr_scheduler.step()" not in alone.stderr
    f.copy(script, "inside", as_name="acc.py")
    second = f.torchrun("-m", "flor.cli", "replay", "--name", "acc", "--segment", "2/2").stdout
    before = truth["inside"].removesuffix(second)
    assert second.startswith("  batch") and before != truth["inside"]
    assert re.search(r"\nepoch [12] loss [\d.]+\n$", before)  # it starts at an epoch's start
