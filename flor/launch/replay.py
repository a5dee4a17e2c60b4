"""What ``flor replay`` does, from a run's name to a session.

``prepare`` checks the request and builds the replay's options (the script as it is now,
rewritten the way the record was); then ``replay_here`` runs it in this process,
``replay_in_parallel`` fans its segments out to local workers or Ray tasks and merges what
they printed, and ``estimate`` says what it would do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from flor import runs
from flor.errors import DIVERGED, FlorError
from flor.inputs import check_name, parse_segment, read_script
from flor.launch.record import Rewritten, instrumented_project, run_project
from flor.launch.start import start
from flor.launch.startup import while_torch_imports
from flor.replay.plan import DEAD, ECHO, check_segments
from flor.replay.ray_backend import shipped_env
from flor.replay.segments import segment_from_env
from flor.replay.world import ReplayWorld, replay_world
from flor.runs import layout
from flor.runs.query import ranges
from flor.runs.records import SegmentResult
from flor.runtime.process.job import Job
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.sources import ProjectFile
from flor.store import Store
from flor.transform.edits import training_edits


@dataclass(frozen=True)
class ReplayRequest:
    """What the user asked ``flor replay`` for."""

    name: str
    run_id: str | None = None
    segment: str | None = None
    workers: int | None = None
    backend: str = "local"
    address: str | None = None
    iterations: str | None = None
    verify: int = 0
    restore: str = "auto"  # or "always": wherever a checkpoint is, even where running is cheaper
    threads: str | None = None  # N, "auto", or None: the recorded count
    replay_id: str | None = None  # given by a parallel replay's parent to its workers
    rank: int | None = None  # of a run recorded by several processes, replayed in one
    segment_from_env: bool = False  # torchrun's RANK/WORLD_SIZE name segments, not a job
    script: str | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prepared:
    run: runs.RecordedRun
    options: Options
    script: str
    argv: list[str]
    workers: int | None
    world: ReplayWorld
    ray_address: str | None  # None: local workers; "local": a new local Ray instance
    ray_env: dict[str, str]  # what Ray tasks must see to reach the store


def prepare(
    request: ReplayRequest,
    store: Store,
    reporter: Reporter,
    environ: Mapping[str, str],
    replays_here: bool = False,
    rewrite: bool = True,
    recorded: runs.RecordedRun | None = None,
) -> Prepared:
    """Check ``request`` and build the replay's options; one-line errors for mistakes.
    ``replays_here``: this process will replay, so torch imports while flor rewrites.
    ``rewrite=False``: the edited script is rewritten later (``check_edit``), while the
    workers of a parallel replay start. ``recorded``: the run, where the caller loaded it.

    Inside a Slurm array job (or under torchrun, with ``segment_from_env``) the
    segment comes from ``environ`` unless the request names one. Under torchrun
    otherwise, the ranks replay a run recorded by as many processes, in step.
    """
    _check_request(request)
    if recorded is None:
        recorded = runs.load_run(store, check_name(request.name), request.run_id)
    run = _recorded_something(recorded)
    world, segment, replay_id = _where(request, run, reporter, environ)
    recorded_script = run.meta.script or ""
    script = request.script or _as_typed(recorded_script)
    same = os.path.abspath(script) == recorded_script
    argv = list(request.args) if request.args or not same else run.meta.argv[1:]
    module = run.meta.module if same else None
    original = read_script(script)
    done = (
        _edited(store, run, script, original, module, reporter, replays_here) if rewrite else None
    )
    options = Options(
        mode="replay",
        name=run.name,
        run_id=run.run_id,
        segment=parse_segment(segment or f"1/{request.workers or 1}"),
        iterations=request.iterations,
        script=os.path.abspath(script),
        module=module,
        source=done.source if done else None,  # None: left to check_edit
        original=original,
        project=done.project if done else (),
        spawned=bool(done and done.spawned),
        replay_id=replay_id or layout.new_id(),
        rank=request.rank,
        segments_from_env=request.segment_from_env,
        verify=request.verify,
        restore_always=request.restore == "always",
        threads=_threads(request.threads, request.workers or 1, os.cpu_count() or 1),
    )
    check_segments(run, options.segment[1])
    ray, ray_env = ray_target(request.backend, request.address, environ)
    return Prepared(run, options, script, list(argv), request.workers, world, ray, ray_env)


def _as_typed(path: str) -> str:
    """A recorded script's path as a user would type it here: relative below the working
    directory (as ``flor run`` reports it), absolute elsewhere."""
    relative = os.path.relpath(path) if path else path
    return path if not path or relative.startswith(os.pardir) else relative


def ray_target(
    backend: str, address: str | None, environ: Mapping[str, str]
) -> tuple[str | None, dict[str, str]]:
    """Where Ray tasks run (None: local processes instead), and what they must see to reach
    the store. No address: RAY_ADDRESS if set, else a new local instance (never a stale
    one's files)."""
    if backend != "ray":
        return None, {}
    return address or environ.get("RAY_ADDRESS") or "local", shipped_env(environ)


def _recorded_something(run: runs.RecordedRun) -> runs.RecordedRun:
    if run.iterations == 0 and run.meta.status == "running":
        raise FlorError(
            "no-iterations",
            f"run {run.name}/{run.run_id} recorded no iterations: it ended before its first "
            "one (killed?), or is still starting; there is nothing to replay",
        )
    return run


def check_edit(prepared: Prepared, store: Store, reporter: Reporter) -> Rewritten | None:
    """What ``prepare(rewrite=False)`` left out: rewrite the edited script, to report how
    (and refuse it in one line where it cannot be)."""
    options = prepared.options
    if options.source is not None:
        return None
    original = options.original or ""
    return _edited(store, prepared.run, prepared.script, original, options.module, reporter)


def _edited(
    store: Store,
    run: runs.RecordedRun,
    script: str,
    original: str,
    module: str | None,
    reporter: Reporter,
    replays_here: bool = False,
) -> Rewritten:
    """The edited script rewritten, its edits that change training warned of."""
    rewritten = _rewritten(run, script, original, module, reporter, replays_here)
    _warn_training_edits(
        store, run, original, rewritten.source, script, rewritten.project, reporter
    )
    return rewritten


def _rewritten(
    run: runs.RecordedRun,
    script: str,
    original: str,
    module: str | None,
    reporter: Reporter,
    replays_here: bool,
) -> Rewritten:
    """The script as the replay runs it: rewritten as the record was, if it was."""

    def rewrite(reporter: Reporter) -> Rewritten:
        return instrumented_project(script, original, reporter, module, run)

    if not run.meta.instrumented:
        return Rewritten(original)
    return while_torch_imports(rewrite, reporter) if replays_here else rewrite(reporter)


def _where(
    request: ReplayRequest, run: runs.RecordedRun, reporter: Reporter, environ: Mapping[str, str]
) -> tuple[ReplayWorld, str | None, str | None]:
    """The world this process replays in, its segment and the replay id, from the request
    and what a scheduler or torchrun put in ``environ``."""
    job = None if request.segment_from_env else Job.from_env(environ)
    world = replay_world(run.meta, job, request.rank)
    if world.in_step and request.workers:
        raise FlorError(
            "bad-option",
            "--workers: under torchrun the ranks replay together; give each torchrun its "
            "--segment I/N instead",
        )
    segment, replay_id = request.segment, request.replay_id
    if not request.workers and not segment:
        assigned = segment_from_env(environ, ranks=request.segment_from_env)
        if assigned is not None:
            segment, replay_id = assigned.segment, replay_id or assigned.replay_id
            reporter.say(f"replaying segment {segment} (from {assigned.source})")
    if job is not None and replay_id is None:
        replay_id = job.agree("replay", layout.new_id())  # every rank's output under one id
    return world, segment, replay_id


def _threads(spec: str | None, workers: int, cores: int) -> int | None:
    """Torch threads per replay process: ``auto`` shares the cores among the workers."""
    if spec is None:
        return None
    if spec == "auto":
        return max(1, cores // workers)
    if not spec.isdigit() or int(spec) < 1:
        raise FlorError("bad-option", f"--threads {spec!r}: a positive number, or auto")
    return int(spec)


def _check_request(request: ReplayRequest) -> None:
    if request.script is not None and request.script.startswith("-"):
        raise FlorError(
            "bad-option", f"unknown option {request.script}; the script goes before its arguments"
        )
    if request.workers and request.segment:
        raise FlorError("bad-option", "--workers runs every segment; --segment runs one: pick one")
    if request.address and request.backend != "ray":
        raise FlorError("bad-option", "--address names a Ray cluster: add --backend ray")
    if request.backend == "ray" and not request.workers:
        raise FlorError("bad-option", "--backend ray runs the segments of --workers K: say K")


def _warn_training_edits(
    store: Store,
    run: runs.RecordedRun,
    original: str,
    source: str,
    script: str,
    project: tuple[ProjectFile, ...],
    reporter: Reporter,
) -> None:
    """Warn, by file and line, of edits that change training itself (``training_edits``),
    in the script and in the project files the run recorded."""
    try:
        recorded = runs.recorded_original(store, run)
    except KeyError:
        return
    edited = [(script, recorded, original, source)]
    then = {f.path: f for f in run.project}
    edited += [
        (f.path, then[f.path].original, f.original, f.source) for f in project if f.path in then
    ]
    for path, before, now, rewritten in edited:
        for note in training_edits(before, now, rewritten, path):
            reporter.warn(f"{path}:{note.line}: {note.message}")


def replay_here(prepared: Prepared, store: Store, reporter: Reporter) -> int:
    """Replay in this process; the exit status: the script's, 2 if uploads failed, or
    ``DIVERGED`` if a re-executed block ended away from the record."""
    return replayed_here(prepared, store, reporter)[0]


def replayed_here(
    prepared: Prepared, store: Store, reporter: Reporter
) -> tuple[int, SegmentResult | None]:
    """``replay_here``'s exit status, and what the replay stored (None: it never closed)."""
    session = start(prepared.options, store, reporter, recorded=prepared.run)
    status = run_project(prepared.options, prepared.argv, reporter)
    session.close()
    if session.diverged:  # said even where the script failed, or uploads did
        reporter.warn(divergence(session.diverged))
    if status or session.upload_failed:
        return status or 2, session.result
    return DIVERGED if session.diverged else 0, session.result


def divergence(where: str) -> str:
    """The line that says a replay left the record, and what that means for its output."""
    return (
        f"a re-executed block ended in another state than the record's ({where}): what it "
        "printed from there may not be what a full run prints"
    )


def estimate(prepared: Prepared) -> list[str]:
    """What the replay would run, segment by segment, and how long it would take."""
    run, options, count = prepared.run, prepared.options, prepared.workers or 1
    full = sum(run.timings.values())
    lines = [
        f"replay of {run.name}/{run.run_id}: {run.iterations} iterations recorded, "
        f"checkpoints at {ranges(sorted(run.commits))}"
    ]
    segments = [options.segment] if count == 1 else [(i, count) for i in range(1, count + 1)]
    slowest = 0.0
    for index, n in segments:
        planned = _segment_estimate(prepared, index, n)
        lines += planned.lines
        lines.append(
            f"  estimate {planned.seconds:.1f}s of training-loop time (the recorded run took {full:.1f}s)"
        )
        slowest = max(slowest, planned.seconds)
    if count > 1:
        lines.append(f"with {count} workers: about {slowest:.1f}s (the slowest segment)")
    return lines


def estimate_seconds(prepared: Prepared) -> tuple[float, int, int]:
    """The whole replay's training-loop seconds, and in how many iterations its blocks are
    restored and re-executed."""
    planned = _segment_estimate(prepared, *prepared.options.segment)
    return planned.seconds, planned.restored, planned.executed


@dataclass(frozen=True)
class _Estimate:
    lines: list[str]
    seconds: float
    restored: int
    executed: int


def _segment_estimate(prepared: Prepared, index: int, n: int) -> _Estimate:
    """Segment ``index`` of ``n``: a line per iteration it runs, and its estimated seconds."""
    from flor.replay.costs import RestoreCost
    from flor.replay.decide import block_action
    from flor.replay.plan import plan_replay

    run, options = prepared.run, prepared.options
    decided = plan_replay(
        runs.as_rank(run, prepared.world.rank),
        options.source or "",
        options.script or "",
        replace(options, segment=(index, n)),
        prepared.world.in_step,
    )
    probed = ", ".join(sorted(decided.probed)) or "none"
    lines = [
        f"segment {index}/{n}: iterations {ranges(sorted(decided.live))}; probed blocks: {probed}"
    ]
    seconds, echoed, restored, ran = 0.0, 0, 0, 0
    cost = RestoreCost(run.meta, options.restore_always or run.meta.world_size > 1)
    for g, action in enumerate(decided.plan.actions):
        if action in (DEAD, ECHO):
            echoed += action == ECHO
            continue
        block = block_action(
            g in decided.plan.entries,
            bool(run.commits.get(g) and run.commits[g].blocks),
            g in decided.usable,
            bool(decided.probed),
            g in decided.verify,
            cost.pays(run.block_timings.get(g)),
        )
        restored, ran = restored + block.restore, ran + 1
        it_time = run.timings.get(g, 0.0)
        seconds += it_time - run.block_timings.get(g, 0.0) if block.restore else it_time
        how = "restore" if block.restore else f"execute ({block.why})"
        lines.append(f"  iteration {g:>5}  {action:<7}  block {how}")
    if echoed:
        lines.append(f"  {echoed} more not run: their recorded output is printed")
    return _Estimate(lines, seconds, restored, ran - restored)
