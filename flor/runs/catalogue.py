"""The run catalogue: which runs a store holds, and what replay needs to know of one."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from flor.errors import FlorError
from flor.runs.layout import (
    STALE_AFTER,
    get_json,
    heartbeat_key,
    is_loop_end,
    journal_folder,
    meta_key,
    original_key,
    project_file_key,
    project_key,
    rank_prefix,
    replay_folder,
    replays_folder,
    run_prefix,
    source_key,
)
from flor.runs.records import CheckpointEntry, Commit, LoopEnd, RunMeta, SegmentResult
from flor.sources import ProjectFile
from flor.store import Store


def list_runs(store: Store, name: str) -> list[str]:
    """Run ids of experiment ``name``, oldest first."""
    return [r for r in store.children(name) if store.exists(meta_key(run_prefix(name, r)))]


def recording(store: Store, run: RecordedRun) -> bool:
    """Whether ``run`` is still being recorded: its run.json says so and its heartbeat (or,
    before the first, its start) is recent. A run killed long ago is not."""
    if run.meta.status != "running":
        return False
    try:
        beat = float(get_json(store, heartbeat_key(run.prefix))["time"])
    except (KeyError, ValueError, TypeError):
        beat = run.meta.started
    return time.time() - beat < STALE_AFTER


def list_experiments(store: Store) -> list[str]:
    return [n for n in store.children("") if not n.startswith(".") and list_runs(store, n)]


@dataclass
class RecordedRun:
    """Everything replay needs to know about one recorded run, read from the store."""

    name: str
    run_id: str
    meta: RunMeta
    source: str
    commits: dict[int, Commit] = field(default_factory=dict)  # iteration -> its commit
    loops: list[LoopEnd] = field(default_factory=list)
    timings: dict[int, float] = field(default_factory=dict)  # iteration -> seconds
    block_timings: dict[int, float] = field(default_factory=dict)  # iteration -> block seconds
    stdout: dict[str, str] = field(default_factory=dict)  # what each iteration printed
    stderr: dict[str, str] = field(default_factory=dict)  # and wrote to stderr
    scalars: dict[int, Any] = field(default_factory=dict)  # iteration -> its loop_scalars
    scalar_firsts: set[int] = field(default_factory=set)  # each entry's first (whole) one
    project: tuple[ProjectFile, ...] = ()  # the other project files the script imported
    partial: dict[int, Commit] = field(default_factory=dict)  # committed by some ranks only
    rank: int = 0  # of a distributed run: whose journal this is
    others: tuple[RecordedRun, ...] = ()  # and the other ranks' journals
    damaged: list[str] = field(default_factory=list)  # journal entries that do not parse

    @property
    def prefix(self) -> str:
        return rank_prefix(run_prefix(self.name, self.run_id), self.rank)

    @property
    def iterations(self) -> int:
        """How many main-loop iterations the record covers."""
        ends = [lp.end for lp in self.loops]
        return max(
            [*ends, *(k + 1 for k in self.commits), *(k + 1 for k in self.timings)], default=0
        )

    @property
    def called(self) -> dict[str, frozenset[str]] | None:
        """Block name -> the callbacks (``RunMeta.callbacks``) it ran in any iteration; None
        where the recording noted none (a hand-annotated run, an older flor, a killed run)."""
        if not self.meta.callbacks:
            return None
        ran: dict[str, set[str]] = {}
        for called in (*(c.called for c in self.commits.values()), *(e.called for e in self.loops)):
            for block, names in called.items():
                ran.setdefault(block, set()).update(names)
        return {block: frozenset(names) for block, names in ran.items()}

    @property
    def complete(self) -> bool:
        """Whether the last loop ended normally (not killed while training)."""
        return bool(self.loops) and self.loops[-1].end == self.iterations


def replay_results(store: Store, prefix: str, replay_id: str) -> list[SegmentResult]:
    """What each segment of replay ``replay_id`` printed and logged."""
    folder = replay_folder(prefix, replay_id)
    keys = [k for k in store.keys(folder) if k.endswith(".json")]
    return [SegmentResult.from_json(get_json(store, k)) for k in keys]


def finished_replay(store: Store, run: RecordedRun, replay_id: str | None) -> list[SegmentResult]:
    """Every segment of replay ``replay_id`` of ``run`` (None: the last to finish); one-line
    errors where there is none, or where it lacks segments."""
    replays = store.children(replays_folder(run.prefix))
    if not replays:
        raise FlorError("no-replay", f"run {run.name}/{run.run_id} has not been replayed")
    if replay_id is not None and replay_id not in replays:
        raise FlorError("no-replay", f"no replay {replay_id!r} (replays: {', '.join(replays)})")
    by_id = {
        r: replay_results(store, run.prefix, r) for r in ([replay_id] if replay_id else replays)
    }
    replay_id = replay_id or max(  # ids sort by start time
        by_id, key=lambda r: (max((s.finished for s in by_id[r]), default=0), r)
    )
    results = by_id[replay_id]
    count = results[0].segment[1] if results else 0
    missing = sorted(set(range(1, count + 1)) - {r.segment[0] for r in results})
    if missing:
        raise FlorError(
            "incomplete-replay",
            f"replay {replay_id} lacks segment(s) {', '.join(map(str, missing))} of {count}; "
            "they failed or are still running",
        )
    return results


def checkpoints(run: RecordedRun) -> list[CheckpointEntry]:
    """The journal's entry of every committed checkpoint of ``run``."""
    return [block for commit in run.commits.values() for block in commit.blocks.values()]


def referenced_blobs(run: RecordedRun) -> dict[str, int]:
    """The tensor blobs (sha256 -> bytes) the run's checkpoints point at: every rank's,
    those only some ranks committed too (the others may still be writing theirs)."""
    commits = [c for j in (run, *run.others) for c in (*j.commits.values(), *j.partial.values())]
    return {
        sha: n for c in commits for entry in c.blocks.values() for sha, n in entry.blobs.items()
    }


def recorded_original(store: Store, run: RecordedRun) -> str:
    """The user's script as recorded: before ``flor run`` rewrote it, if it did."""
    if run.meta.instrumented:
        return store.get(original_key(run.prefix)).decode()
    return run.source


def _project(store: Store, prefix: str, name: str, run_id: str) -> tuple[ProjectFile, ...]:
    """The project files run ``prefix`` recorded beside its script."""
    if not store.exists(project_key(prefix)):
        return ()
    try:
        entries = get_json(store, project_key(prefix))["files"]
        text = {
            sha: store.get(project_file_key(prefix, sha)).decode()
            for sha in {e[part] for e in entries for part in ("original", "source")}
        }
        return tuple(
            ProjectFile(e["path"], e["module"], text[e["original"]], text[e["source"]])
            for e in entries
        )
    except (KeyError, ValueError, TypeError) as e:
        raise FlorError("bad-run", f"run {name}/{run_id} is damaged: project file {e}") from None


def load_run(store: Store, name: str, run_id: str | None = None, rank: int = 0) -> RecordedRun:
    """Read run ``run_id`` of ``name`` (default: the latest); one-line errors if missing.

    A run of several processes is read from rank ``rank``'s journal, beside the other
    ranks' (``others``), and only the iterations every rank committed count as
    committed: a restore must be consistent across ranks (a rank killed mid-run
    committed fewer)."""
    runs = list_runs(store, name)
    if not runs:
        raise FlorError("no-run", f"no recorded run named {name!r} in {store.url}")
    if run_id is None:
        run_id = runs[-1]
    elif run_id not in runs:
        raise FlorError("no-run", f"run {name}/{run_id} not found (runs: {', '.join(runs)})")
    first = _load_journal(store, name, run_id, 0)
    world = first.meta.world_size
    if not 0 <= rank < world:
        raise FlorError(
            "bad-rank", f"run {name}/{run_id} has rank(s) 0..{world - 1}; there is no rank {rank}"
        )
    journals = [first, *(_load_journal(store, name, run_id, r) for r in range(1, world))]
    everywhere = set.intersection(*(set(j.commits) for j in journals))
    for j in journals:
        j.partial = {g: c for g, c in j.commits.items() if g not in everywhere}
        j.commits = {g: c for g, c in j.commits.items() if g in everywhere}
    first.others = tuple(journals[1:])
    return as_rank(first, rank)


def as_rank(run: RecordedRun, rank: int) -> RecordedRun:
    """Rank ``rank``'s journal of ``run``, beside the other ranks'."""
    journals = sorted((run, *run.others), key=lambda j: j.rank)
    chosen = journals[rank]
    return replace(chosen, others=tuple(j for j in journals if j is not chosen))


def load_head(store: Store, name: str, run_id: str, rank: int = 0) -> RecordedRun:
    """A run's metadata and files, its journal not read (what its code version needs)."""
    prefix = rank_prefix(run_prefix(name, run_id), rank)
    try:
        meta = RunMeta.from_json(get_json(store, meta_key(prefix)))
        source = store.get(source_key(prefix)).decode()
    except (KeyError, ValueError) as e:
        whose = f" (rank {rank})" if rank else ""
        raise FlorError("bad-run", f"run {name}/{run_id}{whose} is damaged: {e}") from None
    project = _project(store, prefix, name, run_id)
    return RecordedRun(name, run_id, meta, source, project=project, rank=rank)


def _load_journal(store: Store, name: str, run_id: str, rank: int) -> RecordedRun:
    run = load_head(store, name, run_id, rank)
    prefix = run.prefix
    for key in store.keys(journal_folder(prefix)):
        try:
            data = get_json(store, key)
        except ValueError as e:  # our puts are atomic: someone changed or cut the file
            run.damaged.append(f"journal entry {key} is unreadable ({type(e).__name__})")
            continue
        entry = LoopEnd.from_json(data) if is_loop_end(key) else Commit.from_json(data)
        run.timings.update(entry.timings)
        run.block_timings.update(entry.block_timings)
        run.stdout.update(entry.stdout)
        run.stderr.update(entry.stderr)
        run.scalars.update(entry.scalars)
        if entry.scalars:
            run.scalar_firsts.add(min(entry.scalars))
        if isinstance(entry, LoopEnd):
            run.loops.append(entry)
        elif entry.blocks:  # `flor gc --checkpoints-only` leaves entries without data
            run.commits[entry.iteration] = entry
    run.loops.sort(key=lambda lp: lp.loop)
    return run
