"""A replay spread over processes: the segments of ``flor replay --workers K``, and the runs
of ``--runs``.

Each piece is a ``WorkerJob`` (``worker.py``) replayed by a worker: K at a time in local
processes, or as Ray tasks across a cluster. What the workers hand back is merged here
into what one full run would have printed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace

from flor.launch.replay import Prepared, ReplayRequest, check_edit
from flor.launch.worker import WorkerJob, command, hand_over, job_path, on_ray, taken_outcome
from flor.replay.local import SegmentFailure, run_segments
from flor.replay.merge import merged_output
from flor.runs.records import SegmentResult
from flor.runtime.process.reporter import Reporter
from flor.runtime.trackers.ledger import sent_lines
from flor.store import Store, StoreSettings, shared_url

Label = Callable[[int], str]


@dataclass(frozen=True)
class ParallelReplay:
    output: str  # merged, in iteration order
    errors: str  # what they wrote to stderr, merged the same way
    failures: list[SegmentFailure]
    diverged: list[str]  # each segment's first divergence from the record
    sent: list[str]  # what the segments sent the script's trackers, said


def replay_in_parallel(
    prepared: Prepared, store: Store, settings: StoreSettings, reporter: Reporter
) -> ParallelReplay:
    """Replay every segment at once (local processes, or Ray tasks); merge their output."""
    count, url = prepared.workers or 1, shared_url(store.url)
    if prepared.ray_address is not None:
        check_edit(prepared, store, reporter)  # said here; Ray's start-up dwarfs it
        shipped = os.path.basename(prepared.script)  # the script's folder travels with the tasks
        jobs = [WorkerJob(url, _request(prepared, i, shipped), prepared.run) for i in _each(count)]
        folder = os.path.dirname(os.path.abspath(prepared.script))
        results, failures = in_ray_tasks(
            jobs, settings, folder, (prepared.ray_address, prepared.ray_env), reporter
        )
    else:

        def rewritten_jobs() -> list[WorkerJob]:  # while the workers import torch
            ready = _rewritten(prepared, store, reporter)
            return [_segment_job(ready, url, i) for i in _each(count)]

        results, failures = in_local_processes(rewritten_jobs, count, count, reporter.say)
    diverged = [
        f"segment {r.segment[0]}/{r.segment[1]}: {r.diverged}"
        for r in sorted(results, key=lambda r: r.segment)
        if r.diverged
    ]
    sent = sent_lines([r.sent for r in results])
    errors = merged_output(results, stderr=True)
    return ParallelReplay(merged_output(results), errors, failures, diverged, sent)


def _each(count: int) -> range:
    return range(1, count + 1)


def _rewritten(prepared: Prepared, store: Store, reporter: Reporter) -> Prepared:
    """``prepared`` with the edit rewritten (and reported, or refused in one line)."""
    done = check_edit(prepared, store, reporter)
    if done is None:
        return prepared
    options = replace(
        prepared.options, source=done.source, project=done.project, spawned=bool(done.spawned)
    )
    return replace(prepared, options=options)


def _segment_job(prepared: Prepared, url: str, index: int) -> WorkerJob:
    """Segment ``index``, ready to run: the parent's rewrite, run and options."""
    count = prepared.workers or 1
    options = replace(prepared.options, segment=(index, count))
    ready = replace(prepared, options=options, workers=None)
    return WorkerJob(url, _request(prepared, index, prepared.script), prepared.run, ready)


def _request(prepared: Prepared, index: int, script: str) -> ReplayRequest:
    """Segment ``index`` of ``prepared`` as a request, for a worker that prepares it."""
    run, options = prepared.run, prepared.options
    return ReplayRequest(
        run.name,
        run.run_id,
        segment=f"{index}/{prepared.workers or 1}",
        iterations=options.iterations,
        verify=options.verify,
        restore="always" if options.restore_always else "auto",
        threads=str(options.threads) if options.threads else None,
        replay_id=options.replay_id,
        rank=options.rank,
        script=script,
        args=tuple(prepared.argv),
    )


def in_local_processes(
    jobs: Callable[[], list[WorkerJob]],
    count: int,
    at_once: int,
    progress: Callable[[str], None],
    label: Label | None = None,
) -> tuple[list[SegmentResult], list[SegmentFailure]]:
    """Jobs 1..``count`` in local worker processes, ``at_once`` at a time. The workers
    start first and import torch while ``jobs()`` is computed; then each takes its own."""
    with tempfile.TemporaryDirectory(prefix="flor-replay-") as folder:

        def hand_jobs_over() -> None:
            for index, job in enumerate(jobs(), 1):
                hand_over(job_path(folder, index), job)

        failures = run_segments(
            lambda index: command(folder, index), count, at_once, progress, hand_jobs_over, label
        )
        failed = {f.index for f in failures}
        results = []
        for index in (i for i in _each(count) if i not in failed):
            result = taken_outcome(folder, index, 0).result
            if result is None:  # exited 0 without handing anything back
                failures.append(SegmentFailure(index, 0, "the worker handed no result back"))
            else:
                results.append(result)
    return results, failures


def in_ray_tasks(
    jobs: list[WorkerJob],
    settings: StoreSettings,
    folder: str,
    ray: tuple[str | None, dict[str, str]],
    reporter: Reporter,
    label: Label | None = None,
) -> tuple[list[SegmentResult], list[SegmentFailure]]:
    """``jobs`` as Ray tasks at ``ray`` (an address, None for a new local instance, and what
    the tasks must see to reach the store), ``folder`` travelling as their working directory."""
    from flor.replay.ray_backend import run_segments_on_ray

    return run_segments_on_ray(
        on_ray,
        jobs,
        settings.home,
        ray[0] or "local",
        folder,
        ray[1],
        reporter.say,
        label,
    )
