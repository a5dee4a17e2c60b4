"""What ``flor run`` does: a script rewritten (``instrumented_project``), then recorded.

``record_here`` records it in this process; ``run_project`` runs any rewritten script as
``__main__`` with the project's files rewritten as they are imported (replay uses it too).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flor import runs
from flor.launch import import_hook
from flor.launch.execfile import run_as_main
from flor.launch.project_files import ProjectFiles, project_file
from flor.launch.start import start
from flor.launch.startup import import_torch
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.sources import ENTRY, ProjectFile, SourceFile, project_sources
from flor.store import Store
from flor.transform.fingerprints import block_openings

if TYPE_CHECKING:
    from flor.transform.hindsight import Hindsight


@dataclass(frozen=True)
class Rewritten:
    """The script as ``flor run`` runs it, and the project files it imports."""

    source: str
    project: tuple[ProjectFile, ...] = ()
    spawned: bool = False  # its main loop runs in the processes its mp.spawn starts
    loop: Hindsight | None = None  # its loop's own tests (``start.loop_tests``), if found


def instrumented_project(
    script: str,
    original: str,
    reporter: Reporter,
    as_module: str | None = None,
    recorded: runs.RecordedRun | None = None,
) -> Rewritten:
    """The script as ``flor run`` runs it, and the project files it imports (rewritten
    where a main loop lives in them). Unchanged, with the reasons, where flor cannot
    rewrite it (python then reports a real syntax error itself, exactly as it would).
    ``as_module``: the script is this module, run as ``python -m`` runs it. ``recorded``:
    the run a replay replays, whose blocks begin where its recording's did."""
    from flor.transform import instrument_project  # libcst, which the run itself never needs

    files = ProjectFiles(script, as_module is not None)
    package = as_module.rpartition(".")[0] if as_module else None
    entry = SourceFile(ENTRY, script, original, package=package)
    openings = frozenset[str]()
    if recorded is not None:
        as_run = project_sources(recorded.project, recorded.meta.script or "", recorded.source)
        openings = block_openings(as_run.values())
    result = instrument_project(entry, files.resolve, openings)
    if result.entry.error:
        reporter.warn(f"{script}:{result.entry.error}; running it unmodified")
        return Rewritten(original)
    for line in result.report().splitlines():
        reporter.say(line)
    rewritten = {r.filename: r.source for r in result.others}
    project = tuple(project_file(files, f, rewritten.get(f.path, f.source)) for f in result.files)
    return Rewritten(result.entry.source, project, result.entry.spawned)


def record_here(
    options: Options,
    store: Store,
    reporter: Reporter,
    started: float | None = None,
    loop: Hindsight | None = None,
    resumed: runs.RecordedRun | None = None,
    fork_at: int | None = None,
) -> int:
    """Record ``options.script`` in this process; the exit status (the script's, or 2 if
    uploads failed). ``started``: when flor's start-up began, charged to the run's budget;
    ``loop``: the script's loop tests, found while torch imported; ``resumed``: the run
    that did not finish this recording goes on with, or the run it forks at iteration
    ``fork_at`` (``launch.resume``)."""
    torch_import = import_torch()  # first: the recorder imports it too
    from flor.runtime.loop.recorder import Recorder

    session = start(options, store, reporter, loop=loop, recorded=resumed, fork_at=fork_at)
    if started is not None and isinstance(session, Recorder):  # not a spawning parent
        session.charge_setup(max(time.perf_counter() - started - torch_import, 0.0))
    argv = list(options.argv or ())[1:]
    status = run_project(options, argv, reporter)
    session.close(status)
    return status or (2 if session.upload_failed else 0)


def run_project(options: Options, argv: list[str], reporter: Reporter) -> int:
    """Run the script as ``__main__``, the project's files it imports rewritten as planned."""
    script = options.script or ""
    hook = import_hook.install(import_hook.rewritten_files(options))
    try:
        return run_as_main(
            script, argv, options.source or "", options.original, reporter, options.module
        )
    finally:
        import_hook.uninstall(hook)
