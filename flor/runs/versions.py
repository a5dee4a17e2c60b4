"""A run's code version: the sources it recorded, and a short hash naming them.

Every run keeps the user's files as they were when it ran (the script before flor
rewrote it, and each project file it imported), so the version is read, never guessed.
Two runs of unchanged code share a version; a changed comment makes a new one.
"""

from __future__ import annotations

import hashlib
import os
import re

from flor.errors import FlorError
from flor.runs.catalogue import RecordedRun, list_runs, load_head, recorded_original
from flor.sources import ENTRY
from flor.store import Store

SourceFiles = dict[str, str]  # ENTRY (the script) or a path relative to the project root -> text


def recorded_sources(store: Store, run: RecordedRun) -> SourceFiles:
    """The files ``run`` ran, as the user wrote them; a one-line error where they are gone."""
    try:
        entry = recorded_original(store, run)
    except KeyError:
        raise FlorError(
            "no-sources", f"run {run.name}/{run.run_id} has no recorded sources in the store"
        ) from None
    return {ENTRY: entry, **{f.path: f.original for f in run.project}}


def version_of(files: SourceFiles) -> str:
    """Seven hex digits naming these sources (the entry script's name aside)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(f"{path}\0{len(files[path])}\0".encode())
        digest.update(files[path].encode())
    return digest.hexdigest()[:7]


def entry_name(run: RecordedRun) -> str:
    return os.path.basename(run.meta.script or "script.py")


def select_runs(store: Store, name: str, spec: str) -> list[RecordedRun]:
    """The runs of ``name`` that ``spec`` names, oldest first (``select_run_ids``): their
    metadata and files, not their journals (each run's own replay reads its journal)."""
    return [load_head(store, name, run_id) for run_id in select_run_ids(store, name, spec)]


def select_run_ids(store: Store, name: str, spec: str) -> list[str]:
    """The ids of the runs of ``name`` that ``spec`` names, oldest first: ``all``,
    ``latest:N``, ``since:YYYY-MM-DD``, or run ids separated by commas."""
    ids = list_runs(store, name)
    if not ids:
        raise FlorError("no-run", f"no recorded run named {name!r} in {store.url}")
    return _chosen(ids, spec, name)


def _chosen(ids: list[str], spec: str, name: str) -> list[str]:
    if spec == "all":
        return ids
    if m := re.fullmatch(r"latest:([1-9][0-9]*)", spec):
        return ids[-int(m.group(1)) :]
    if m := re.fullmatch(r"since:(\d{4})-(\d{2})-(\d{2})", spec):
        return [i for i in ids if i.split("-")[0] >= "".join(m.groups())]  # ids start UTC dates
    wanted = [i.strip() for i in spec.split(",") if i.strip()]
    unknown = [i for i in wanted if i not in ids]
    if not wanted or ":" in spec:
        why = "not a selection"
    elif unknown:
        why = f"{name} has no run {', '.join(unknown)}"
    else:
        return [i for i in ids if i in wanted]
    raise FlorError(
        "bad-runs",
        f"--runs {spec}: {why} (all, latest:N, since:YYYY-MM-DD, or run ids separated by "
        "commas; `flor ls` lists them)",
    )
