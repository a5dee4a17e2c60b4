"""What ``flor show``, ``ls``, ``logs`` and ``diff`` say about runs, as text."""

from __future__ import annotations

import csv
import datetime
import difflib
import io
import json
import os
from collections.abc import Callable
from typing import Any

from flor.errors import FlorError
from flor.inputs import read_script
from flor.runs.catalogue import RecordedRun
from flor.runs.query import ranges, summary
from flor.store import Store


def rows(store: Store, run: RecordedRun) -> list[tuple[str, Any]]:
    """``flor show``'s rows for ``run``: metadata, iterations, checkpoints, overhead, size."""
    name = run.name
    s = summary(store, run)
    return [
        ("run", f"{name}/{run.run_id}"),
        ("script", f"{s.get('script')}" + (f" (-m {run.meta.module})" if run.meta.module else "")),
        ("project", _project_line(run)),
        ("ranks", _ranks_line(run)),
        ("argv", " ".join(s.get("argv", []))),
        ("started", when(s.get("started"))),
        ("ended", when(s.get("ended"))),
        ("status", status_text(run)),
        *_lineage_rows(run),
        ("iterations", s["iterations"]),
        ("checkpoints", f"{len(s['committed'])} at iterations {ranges(s['committed'])}"),
        ("overhead", f"{run.meta.overhead:.2%}: {run.meta.overhead_parts()}"),
        ("per ckpt", _cost_line(s, run.meta.checkpoint_seconds)),
        *_skipped_rows(run.meta.skipped_behind),
        ("storage", _storage_line(s)),
        ("size", _size_line(s)),
        ("numerics", json.dumps(s.get("numerics", {}))),
        ("replays", ", ".join(s["replays"]) or "-"),
    ]


def status_text(run: RecordedRun, detail: bool = True) -> str:
    """How the run ended: finished (with or without a loop), failed (with its exit status,
    and the iteration its loop stopped in, where an exception left it), or not at all.
    ``detail=False``: the word alone (``flor ls``)."""
    meta = run.meta
    if not detail:
        return meta.status if meta.status != "running" or run.complete else "incomplete"
    if meta.status == "failed":
        where = ""
        if run.loops and run.loops[-1].status == "closed" and run.loops[-1].count > 0:
            last = run.loops[-1]
            where = f"; its loop stopped in iteration {last.first + last.count - 1}"
        return f"failed (exit status {meta.exit_status}{where})"
    if meta.status == "finished":
        return "finished"
    return meta.status if run.complete else "incomplete (killed?)"


def _lineage_rows(run: RecordedRun) -> list[tuple[str, str]]:
    """The run it was forked from (``flor run --from``) and the set-up values that won
    there; each time it was resumed (``flor run --resume``): where it went on, and when."""
    meta, out = run.meta, []
    if meta.parent is not None:
        out.append(("forked from", f"{run.name}/{meta.parent} at iteration {meta.forked_at}"))
        for path, leaves in meta.fork_settings.items():
            changed = ", ".join(f"{leaf}={value!r}" for leaf, value in leaves.items())
            out.append(("fork set", f"{path}: {changed}"))
    out += [("resumed", f"at iteration {g} ({when(t)})") for g, t in meta.resumed]
    return out


def _lineage(run: RecordedRun) -> str:
    """``flor ls``'s words on where the run came from: its fork point, its resumes."""
    meta, said = run.meta, ""
    if meta.parent is not None:
        said += f", forked from {meta.parent}@{meta.forked_at}"
    return said + (f", resumed {len(meta.resumed)}x" if meta.resumed else "")


def _project_line(run: RecordedRun) -> str:
    """The project files the run recorded beside its script, the rewritten ones marked."""
    if not run.project:
        return "-"
    names = [f.path + (" (rewritten)" if f.rewritten else "") for f in run.project]
    return f"{len(names)} more files: {', '.join(names)}"


def _ranks_line(run: RecordedRun) -> str:
    """The processes of a distributed run, and what each committed."""
    if not run.others:
        return "-"
    journals = sorted((run, *run.others), key=lambda j: j.rank)
    partial = sorted({g for j in journals for g in j.partial})
    line = f"{len(journals)} processes ({run.meta.launcher or 'torchrun'}), a journal each"
    if partial:
        line += f"; iterations {ranges(partial)} committed by some ranks only (not replayed)"
    return line


def _cost_line(s: dict[str, Any], spent: float) -> str:
    """Where a checkpoint's cost goes (``spent``: all checkpoints' seconds): what decides how
    many the budget buys."""
    taken = s.get("checkpoints") or 0
    if not taken:
        return "-"
    stalls = s.get("stall_seconds") or []
    stall = sum(stalls) / len(stalls) if stalls else 0.0
    writer = max(spent / taken - stall, 0.0)
    kept = taken - (s.get("thinned") or 0)
    size = s.get("checkpoint_bytes", 0) / kept if kept else 0.0
    return (
        f"{1000 * spent / taken:.1f} ms: {1000 * stall:.1f} ms on the training thread (copying, "
        f"and serializing a small one), {1000 * writer:.1f} ms the writer's (what its hashing and "
        f"writing cost training); {size / 1e6:.2f} MB"
    )


def _skipped_rows(behind: int) -> list[tuple[str, str]]:
    """Checkpoints the budget allowed that the run did not take, and why."""
    if not behind:
        return []
    why = "the writer still held as many bytes of earlier snapshots as it may (memory was short)"
    return [("skipped", f"{behind} checkpoints: {why}")]


def _storage_line(s: dict[str, Any]) -> str:
    """What the storage budget kept of the checkpoints taken."""
    budget = s.get("storage_budget") or "-"
    taken, thinned = s.get("checkpoints") or 0, s.get("thinned") or 0
    stored = s.get("stored_bytes", 0) / 1e6
    kept = taken - thinned
    per = f", {stored / kept:.2f} MB each" if kept else ""
    return f"budget {budget}: kept {kept} of {taken} taken ({stored:.1f} MB stored{per})"


def _size_line(s: dict[str, Any]) -> str:
    line = f"{s['bytes'] / 1e6:.1f} MB"
    if s["checkpoint_bytes"]:
        line += (
            f" (checkpoints hold {s['checkpoint_bytes'] / 1e6:.1f} MB; "
            f"deduplication saved {s['saved_bytes'] / 1e6:.1f} MB)"
        )
    return line


def when(ts: float | None) -> str:
    """A time as ``flor ls`` and ``flor show`` print it; ``-`` for none."""
    if not ts:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def listing(store: Store) -> list[str]:
    """``flor ls``'s lines: every run of every experiment, newest last (none: no lines)."""
    from flor.runs.catalogue import list_experiments, list_runs, load_run

    lines = []
    for name in list_experiments(store):
        for run_id in list_runs(store, name):
            run = load_run(store, name, run_id)
            s, status = summary(store, run), status_text(run, detail=False)
            status += _lineage(run)
            lines.append(
                f"{name:<20} {run_id:<24} {when(s.get('started')):<19} {s['iterations']:>5} "
                f"{s['bytes'] / 1e6:>7.1f}MB  {status}"
            )
    if lines:
        lines.insert(
            0, f"{'NAME':<20} {'RUN':<24} {'STARTED':<19} {'ITERS':>5} {'SIZE':>9}  STATUS"
        )
    return lines


def logged_table(rows: list[dict[str, Any]], fmt: str) -> str:
    """``flor logs``'s values as a table, CSV or JSON."""
    if fmt == "json":
        return json.dumps(rows, indent=1) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, ["source", "iteration", "step", "name", "value"])
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k) for k in writer.fieldnames})
        return out.getvalue()
    lines = [f"{'ITER':>5}  {'NAME':<16} {'VALUE':<24} SOURCE"]
    for r in rows:
        it = "-" if r["iteration"] is None else r["iteration"]
        lines.append(f"{it:>5}  {r['name']:<16} {json.dumps(r['value']):<24} {r['source']}")
    return "\n".join(lines) + "\n"


def run_diff(store: Store, run: RecordedRun, missing: Callable[[str], None]) -> str:
    """``flor diff``: the instrumentation flor applied to ``run``, then each recorded file
    (the script and its project files) against the file as it is now; ``missing`` hears of
    a file that no longer exists."""
    from flor.runs.catalogue import recorded_original

    script = run.meta.script or ""
    recorded = recorded_original(store, run)
    root = run.meta.cwd if run.meta.module else os.path.dirname(script)  # where paths start
    files = [(script, recorded, run.source if run.meta.instrumented else recorded)]
    files += [(os.path.join(root, f.path), f.original, f.source) for f in run.project]
    parts = [
        _unified(original, source, path, f"{path} (instrumented)")
        for path, original, source in files
    ]
    unchanged = 0
    for path, original, _ in files:
        try:
            current = read_script(path)
        except FlorError:
            missing(path)
            continue
        changes = _unified(original, current, f"{path} (recorded)", f"{path} (now)")
        parts.append(changes)
        unchanged += not changes
    if unchanged == len(files):
        what = f"{script} and the {len(files) - 1} project files it imports are"
        parts.append(f"# {what if len(files) > 1 else script + ' is'} unchanged since the run\n")
    return "".join(parts)


def _unified(a: str, b: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), old, new))
