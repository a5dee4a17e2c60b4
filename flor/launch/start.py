"""Starting a run: the session a process asked for, built and installed once.

The ``flor`` command calls ``start`` with what it parsed. ``import flor`` calls
``activate_from_process``, which reads what a hand-annotated script was given:
the legacy flags ``--flor NAME`` and ``--replay_flor [I/N]`` (removed from
``sys.argv`` before the script's own parser runs), ``FLOR_EPSILON``,
``FLOR_ITERATIONS``, ``FLOR_RESUME`` (1: as ``flor run --resume``), and the store's
variables. Without the flags flor is off.

It builds a record session or a replay session, so it sits on the replay floor,
the lowest that sees both; the runtime only holds what it installs.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from flor.errors import FlorError
from flor.inputs import check_name, parse_epsilon, parse_restore, parse_segment, parse_storage
from flor.runtime import trackers, trainers
from flor.runtime.loop import context
from flor.runtime.process.options import Options

if TYPE_CHECKING:  # the rest is imported once a run starts: `import flor` stays cheap
    from flor.runs import RecordedRun
    from flor.runs.records import RunMeta
    from flor.runtime.journal.conditions import Lookahead
    from flor.runtime.loop.identity import ForkPoint
    from flor.runtime.loop.session import Session
    from flor.runtime.process.job import Job
    from flor.runtime.process.reporter import Reporter
    from flor.sources import ProjectFile
    from flor.store import Store
    from flor.transform.hindsight import Hindsight


def start(
    options: Options,
    store: Store,
    reporter: Reporter,
    job: Job | None = None,
    loop: Hindsight | None = None,
    recorded: RecordedRun | None = None,
    fork_at: int | None = None,
) -> Session:
    """Build the session ``options`` ask for, install it, and make FlorErrors one line.
    ``job``: this process is that rank of a job the script's ``mp.spawn`` started (None:
    torchrun's, if any, from the environment). ``loop``: a recording's ``loop_tests``,
    where the caller has them already (None: found here). ``recorded``: the run a replay
    replays, where the caller loaded it (None: loaded by the session), or the run a
    recording resumes, or forks at iteration ``fork_at`` (``launch.resume``)."""
    sys.excepthook = _one_line_errors(sys.excepthook, reporter)
    trainers.install(reporter)  # a loop that lives in a library (Lightning's) takes flor's
    trackers.install(lambda: getattr(context.current(), "trackers", None))  # MLflow, TensorBoard
    if options.spawned and job is None:
        from flor.launch.spawn import SpawnParent

        return context.install(SpawnParent(options, store, reporter, start))
    from flor.runtime.journal.stdout_capture import Streams

    if job is None and not options.segments_from_env:  # torchrun's, read here, once
        from flor.runtime.process.job import Job

        job = Job.from_env(os.environ)
    if options.mode == "record":
        from flor.runtime.loop.recorder import Recorder

        if loop is None:
            loop = loop_tests(options.script, options.source, options.project)
        lookahead, watched = _recording_hints(loop)

        def recorder(
            options: Options, continues: RunMeta | None = None, fork: ForkPoint | None = None
        ) -> Recorder:
            streams = Streams(keep_stderr=True)  # a restored block's stderr is replayed
            return Recorder(
                options, store, reporter, streams, lookahead, watched, job, continues, fork
            )

        if recorded is not None and fork_at is not None:  # a new run from its checkpoint
            from flor.launch.resume import Forker

            return context.install(Forker(options, store, reporter, recorded, recorder, fork_at))
        if recorded is not None:  # a run that did not finish, resumed
            from flor.launch.resume import Resumer

            return context.install(Resumer(options, store, reporter, recorded, recorder, job))
        return context.install(recorder(options))
    from flor.replay.session import Replayer

    streams = Streams(keep_stderr=True)  # what it writes to stderr: merged across segments
    return context.install(Replayer(options, store, reporter, streams, job, recorded))


def loop_tests(
    script: str | None, source: str | None, project: tuple[ProjectFile, ...] = ()
) -> Hindsight:
    """The recorded loop's own periodic tests and its counters
    (``flor.transform.hindsight.periodic``), in ``source`` (None: the script's file) and the
    project's files; dense where the script does not tell. Pure analysis of the script as
    it runs: ``flor run`` does it while torch imports."""
    from flor.sources import project_sources
    from flor.transform.hindsight import Hindsight, loop_file, periodic

    if source is None:
        try:
            with open(script or "", encoding="utf-8") as f:
                source = f.read()
        except OSError:
            return Hindsight(dense="the script cannot be read")
    script = script or "<script>"
    files = project_sources(project, script, source)
    where = loop_file(files, script)
    try:
        return periodic(files[where], where)
    except FlorError:  # not python: the run reports it
        return Hindsight(dense="the script does not parse")


def _recording_hints(found: Hindsight) -> tuple[Lookahead | None, frozenset[str] | None]:
    """The loop's tests to evaluate ahead, and the counters to note: the only values of the
    loop a replay's conditions read from the record; None where the script does not tell."""
    from flor.runtime.journal.conditions import Guards, Lookahead

    if not found.sparse:  # not one flor.it loop: note every counter-like value
        return None, None
    if not found.guards:
        return None, found.counters
    return Lookahead(Guards(found.guards, found), dict(found.steps)), found.counters


def _one_line_errors(previous: Any, reporter: Reporter) -> Any:
    """A FlorError raised inside the user's script (a corrupt checkpoint) is a
    one-line message, not a traceback; the user's own exceptions are untouched."""

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if isinstance(value, FlorError):
            reporter.error(value.message)
        else:
            previous(kind, value, tb)
            context.report_where()

    return hook


def strip_legacy_flags(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Remove ``--flor NAME`` and ``--replay_flor [I/N]`` from ``argv``.

    ``--flor`` takes exactly one value and ``--replay_flor`` at most one, and only
    when it looks like ``I/N``, so the script's own positional arguments after
    them stay where they were (``train.py --flor exp 8`` leaves ``8``).
    """
    kept: list[str] = [argv[0]] if argv else []
    found: dict[str, str] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--flor" or arg.startswith("--flor="):
            if "=" in arg:
                found["name"] = arg.split("=", 1)[1]
            elif i + 1 < len(argv):
                found["name"] = argv[i + 1]
                i += 1
            else:
                raise FlorError("no-name", "--flor needs a run name: --flor NAME")
        elif arg == "--replay_flor" or arg.startswith("--replay_flor="):
            if "=" in arg:
                found["segment"] = arg.split("=", 1)[1]
            elif i + 1 < len(argv) and "/" in argv[i + 1] and not argv[i + 1].startswith("-"):
                found["segment"] = argv[i + 1]
                i += 1
            else:
                found["segment"] = ""  # the whole run, or what a Slurm array/torchrun assigns
        else:
            kept.append(arg)
        i += 1
    if "segment" in found and "name" not in found:
        raise FlorError("no-name", "--replay_flor needs --flor NAME to say which run")
    return kept, found


def legacy_options(found: dict[str, str], environ: Mapping[str, str], script: str) -> Options:
    """The options the legacy flags ``found`` give (and ``FLOR_EPSILON``, ``FLOR_STORAGE``,
    ``FLOR_ITERATIONS``, ``FLOR_RESTORE``)."""
    segment, replay_id = found.get("segment") or "1/1", None
    if found.get("segment") == "":
        from flor.replay.segments import segment_from_env

        assigned = segment_from_env(environ)
        if assigned is not None:
            segment, replay_id = assigned.segment, assigned.replay_id
    return Options(
        mode="replay" if "segment" in found else "record",
        name=check_name(found["name"]),
        segment=parse_segment(segment),
        iterations=environ.get("FLOR_ITERATIONS") or None,
        restore_always=parse_restore(environ.get("FLOR_RESTORE")),
        epsilon=parse_epsilon(environ.get("FLOR_EPSILON")),
        storage=parse_storage(environ.get("FLOR_STORAGE")),
        script=script,
        replay_id=replay_id,
    )


def activate_from_process() -> None:
    """Called once by ``import flor``: start a run if the legacy flags ask for one.

    Processes the script starts (DataLoader workers) never start runs of their
    own. Errors are user mistakes: one line on stderr and exit status 2.
    """
    if multiprocessing.parent_process() is not None or context.current() is not None:
        return
    from flor.runtime.process.reporter import Reporter

    reporter = Reporter()
    try:
        argv, found = strip_legacy_flags(sys.argv)
        if not found:
            return
        from flor import runs
        from flor.store import StoreSettings

        sys.argv[:] = argv
        script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        options = legacy_options(found, os.environ, script)
        settings = StoreSettings.from_env(os.environ)
        recording = options.mode == "record"
        store = runs.open_store(None, settings, warn=reporter.warn, spool=recording)
        resumed = None
        if recording and os.environ.get("FLOR_RESUME", "") not in ("", "0"):
            from flor.launch.resume import unfinished

            asked = replace(options, argv=tuple(sys.argv))
            resumed = unfinished(store, asked, reporter.say, os.environ)
        start(options, store, reporter, recorded=resumed)
    except FlorError as e:
        reporter.error(e.message)
        raise SystemExit(e.exit_code) from None
