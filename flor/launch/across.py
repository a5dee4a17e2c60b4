"""``flor replay --runs``: one hindsight edit, replayed in every chosen run at its own version.

The edit is what the script on disk adds to the newest recorded version it extends by
added statements only (the *base*); ``transform.carry`` re-inserts it into each other
version's files. Each version's files are written to a folder of their own, and every run
replays there as the job of a worker process of its own, K at a time (or as Ray tasks),
exactly as a single replay would: restored blocks, probes, ``--verify``. A run the edit
cannot be carried to is skipped with the reason; a run that fails does not stop the others.
"""

from __future__ import annotations

import difflib
import io
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flor import runs
from flor.errors import FlorError
from flor.inputs import read_script
from flor.launch.fanout import in_local_processes, in_ray_tasks
from flor.launch.replay import ReplayRequest, estimate_seconds, prepare
from flor.launch.worker import WorkerJob
from flor.replay.local import SegmentFailure
from flor.replay.merge import merged_output
from flor.runs import layout
from flor.runs.versions import SourceFiles, entry_name, recorded_sources, select_runs, version_of
from flor.runtime.process.reporter import Reporter
from flor.runtime.trackers.ledger import sent_lines
from flor.sources import ENTRY
from flor.store import Store, StoreSettings, shared_url
from flor.transform.carry import Edit, carry, edit_of
from flor.transform.edits import training_edits


@dataclass(frozen=True)
class RunPlan:
    """One chosen run: its version, and the files it replays (the edit carried), or why not."""

    run: runs.RecordedRun
    version: str
    recorded: SourceFiles
    files: SourceFiles
    skipped: str | None = None


@dataclass(frozen=True)
class Across:
    base: runs.RecordedRun  # the newest run whose version the edit extends
    base_version: str
    added: int  # statements the edit adds, in all files
    plans: list[RunPlan]


def plan_across(store: Store, name: str, spec: str, script: str | None) -> Across:
    """The chosen runs of ``name``, each with the edit on disk carried to its version."""
    chosen = select_runs(store, name, spec)
    script = script or chosen[-1].meta.script or ""
    read_script(script)  # one line if it is gone
    base, base_files, edits = _base(store, name, script)
    base_version = version_of(base_files)
    carried: dict[str, tuple[SourceFiles, str | None]] = {}
    plans = []
    for run in chosen:
        try:
            recorded = recorded_sources(store, run)
        except FlorError as e:  # its sources are gone: the others still replay
            plans.append(RunPlan(run, "unknown", {}, {}, e.message))
            continue
        version = version_of(recorded)
        if run.meta.module:  # its files would run as files, not as the package's module
            plans.append(RunPlan(run, version, recorded, recorded, _AS_MODULE))
            continue
        if version not in carried:
            current = _on_disk(script, base_files) if version == base_version else None
            carried[version] = (current, None) if current else _carried(recorded, edits)
        files, skipped = carried[version]
        plans.append(RunPlan(run, version, recorded, files, skipped))
    added = sum(len(a.statements) for e in edits.values() for a in e.added)
    return Across(base, base_version, added, plans)


_AS_MODULE = "it ran as `python -m MODULE`, which --runs does not replay yet (--run ID does)"


def _base(
    store: Store, name: str, script: str
) -> tuple[runs.RecordedRun, SourceFiles, dict[str, Edit]]:
    """The newest run whose files the script on disk (and the project files beside it)
    only add statements to, those files, and the edit of each."""
    for run_id in reversed(runs.list_runs(store, name)):
        run = runs.load_head(store, name, run_id)
        try:
            recorded = recorded_sources(store, run)
        except FlorError:
            continue
        current = _on_disk(script, recorded)
        if current is None:
            continue
        edits = {
            path: edit_of(recorded[path], current[path], _shown(path, script)) for path in current
        }
        if all(e.pure for e in edits.values()):
            return run, recorded, {p: e for p, e in edits.items() if e.added}
    raise FlorError(
        "no-base",
        f"{script} is no recorded version of {name} with statements added: --runs carries "
        "added statements only (an edit that also changes or removes one extends no version); "
        f"replay one run with `flor replay --name {name} --run ID`",
    )


def _on_disk(script: str, like: SourceFiles) -> SourceFiles | None:
    """The files of ``like`` as they are on disk now (None if one is gone)."""
    root = os.path.dirname(os.path.abspath(script))
    found = {}
    for path in like:
        where = script if path == ENTRY else os.path.join(root, path)
        try:
            with open(where, encoding="utf-8") as f:
                found[path] = f.read()
        except OSError:
            return None
    return found


def _carried(recorded: SourceFiles, edits: dict[str, Edit]) -> tuple[SourceFiles, str | None]:
    files = dict(recorded)
    for path, edit in edits.items():
        shown = "the script" if path == ENTRY else path
        if path not in recorded:
            return recorded, f"{shown} is not in this version"
        done = carry(edit, recorded[path], path)
        if done.refused:
            return recorded, f"{shown}: {done.refused}"
        files[path] = done.source
    return files, None


def _shown(path: str, script: str) -> str:
    return os.path.basename(script) if path == ENTRY else path


def training_warnings(plan: RunPlan) -> list[str]:
    """The carried edit's lines that change training, in this run's version."""
    found = []
    for path, source in plan.files.items():
        if source != plan.recorded.get(path, source):
            name = _shown(path, entry_name(plan.run))
            for note in training_edits(plan.recorded[path], source, "", name):
                found.append(f"run {plan.run.run_id}: {name}:{note.line}: {note.message}")
    return found


def shown_edits(across: Across) -> list[str]:
    """Per version, the diff each of its runs will replay (or why it is skipped)."""
    lines = [base_line(across)]
    done = set()
    for plan in across.plans:
        if plan.version in done:
            continue
        done.add(plan.version)
        ids = ", ".join(p.run.run_id for p in across.plans if p.version == plan.version)
        lines.append(f"version {plan.version} (runs {ids}):")
        if plan.skipped:
            lines.append(f"  skipped: {plan.skipped}")
            continue
        for path, source in sorted(plan.files.items()):
            name = _shown(path, entry_name(plan.run))
            lines += difflib.unified_diff(
                plan.recorded[path].splitlines(),
                source.splitlines(),
                f"{name} (recorded)",
                f"{name} (replayed)",
                lineterm="",
            )
    return lines


def base_line(across: Across) -> str:
    statements = "1 statement" if across.added == 1 else f"{across.added} statements"
    return (
        f"the edit adds {statements} to version {across.base_version} "
        f"(run {across.base.run_id}, the newest it extends)"
    )


def planned(across: Across, store: Store, restore: str = "auto", verify: int = 0) -> list[str]:
    """``--plan``: per run, its version, whether the edit reaches it, and the estimate, for
    the replay's own ``restore`` and ``verify`` choices (each run's replay gets them)."""
    lines = [base_line(across)]
    with tempfile.TemporaryDirectory(prefix="flor-versions-") as folder:
        for plan in across.plans:
            head = f"run {plan.run.run_id}  version {plan.version}"
            if plan.skipped:
                lines.append(f"{head}  skipped: {plan.skipped}")
                continue
            script = _written(folder, plan)
            quiet = Reporter(io.StringIO())
            prepared = prepare(
                ReplayRequest(
                    plan.run.name,
                    plan.run.run_id,
                    script=script,
                    args=_argv(plan),
                    restore=restore,
                    verify=verify,
                ),
                store,
                quiet,
                os.environ,
            )
            seconds, restored, executed = estimate_seconds(prepared)
            full = sum(prepared.run.timings.values())
            lines.append(
                f"{head}  carried: blocks restored in {restored} iterations, re-run in "
                f"{executed}; estimate {seconds:.2f}s of training (recorded {full:.2f}s)"
            )
    return lines


def _argv(plan: RunPlan) -> tuple[str, ...]:
    return tuple(plan.run.meta.argv[1:])


def _written(folder: str, plan: RunPlan) -> str:
    """The version's files under ``folder``/VERSION, as they sat beside the script; the
    script's path."""
    root = os.path.join(folder, plan.version)
    for path, source in plan.files.items():
        target = os.path.join(root, entry_name(plan.run) if path == ENTRY else path)
        if os.path.exists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write(source)
    return os.path.join(root, entry_name(plan.run))


@dataclass(frozen=True)
class Replayed:
    outputs: dict[str, str]  # run id -> what its replay printed
    failures: dict[str, SegmentFailure]  # run id -> how it failed
    sent: list[str] = field(default_factory=list)  # what they sent the script's trackers
    errors: dict[str, str] = field(default_factory=dict)  # run id -> what it wrote to stderr


@dataclass(frozen=True)
class Workers:
    """How the runs replay: ``count`` at a time in local processes, or as Ray tasks."""

    count: int = 1
    ray_address: str | None = None
    ray_env: dict[str, str] = field(default_factory=dict)
    passed: Mapping[str, Any] = field(default_factory=dict)  # what every run's request gets


def replay_across(
    across: Across, store: Store, settings: StoreSettings, reporter: Reporter, workers: Workers
) -> Replayed:
    """Replay every run the edit reaches, each as its own worker's job (``fanout``) in the
    folder its version's files were written to."""
    todo = [p for p in across.plans if p.skipped is None]
    replay_id, url = layout.new_id(), shared_url(store.url)
    on_ray = workers.ray_address is not None
    with tempfile.TemporaryDirectory(prefix="flor-versions-") as folder:
        scripts = [_written(folder, p) for p in todo]
        jobs = [
            WorkerJob(
                url,
                ReplayRequest(
                    plan.run.name,
                    plan.run.run_id,
                    segment="1/1",
                    replay_id=replay_id,
                    script=os.path.relpath(script, folder) if on_ray else script,  # Ray ships it
                    args=_argv(plan),
                    **workers.passed,
                ),
                None,  # its journal, read by its worker (the plan read only the run's head)
            )
            for plan, script in zip(todo, scripts, strict=True)
        ]
        if on_ray:
            where = (workers.ray_address, workers.ray_env)
            results, failed = in_ray_tasks(jobs, settings, folder, where, reporter, _label(todo))
        else:
            results, failed = in_local_processes(
                lambda: jobs, len(todo), workers.count, reporter.say, _label(todo)
            )
    outputs = {r.run_id: merged_output([r]) for r in results}
    errors = {r.run_id: merged_output([r], stderr=True) for r in results}
    failures = {todo[f.index - 1].run.run_id: f for f in failed}
    return Replayed(outputs, failures, sent_lines([r.sent for r in results]), errors)


def _label(todo: list[RunPlan]) -> Callable[[int], str]:
    return lambda index: f"run {todo[index - 1].run.run_id} (version {todo[index - 1].version})"
