"""``flor instrument`` and ``flor run``: a script rewritten, shown or recorded."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, NoReturn

import click

from flor import runs
from flor.cli.edge import SCRIPT_SETTINGS, STARTED, Edge
from flor.errors import FlorError
from flor.inputs import (
    DEFAULT_EPSILON,
    DEFAULT_STORAGE,
    check_name,
    parse_fork_point,
    parse_storage,
    read_script,
)
from flor.launch.project_files import ProjectFiles, module_script
from flor.runs.records import RunMeta
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.sources import ENTRY, SourceFile
from flor.store import Store

if TYPE_CHECKING:  # flor.transform's import is for what rewrites, after the fork
    from flor.transform.report import ProjectInstrumented


@click.command()
@click.argument("script")
@click.option(
    "-o",
    "--output",
    help="Write the instrumented script here; a folder gets the project's tree.",
)
@click.option("--write", is_flag=True, help="Rewrite SCRIPT in place.")
@click.option("--all", "every_file", is_flag=True, help="With --write: every file it rewrites.")
@click.option("-m", "as_module", is_flag=True, help="SCRIPT names a module, as in `flor run -m`.")
def instrument(
    script: str, output: str | None, write: bool, every_file: bool, as_module: bool
) -> None:
    """Rewrite SCRIPT for flor: wrap its main loop in flor.it and its training in a SkipBlock.

    The loop may live in a project file SCRIPT imports: that file is rewritten instead.
    Prints one unified diff per rewritten file on stdout and the decisions (main loop,
    each block and its state, warnings) on stderr. Add `# flor: skip` above a loop, or
    `# flor: skip-file` at the top of a file, to opt out.
    """
    from flor.transform import instrument_project  # libcst: only for what rewrites

    package = None
    if as_module:
        script, package = module_script(script), script.rpartition(".")[0]
    files = ProjectFiles(script, as_module)
    entry = SourceFile(ENTRY, script, read_script(script), package=package)
    result = instrument_project(entry, files.resolve)
    if result.entry.error:
        raise FlorError("syntax", f"{script}:{result.entry.error}")
    elsewhere = [r.filename for r in result.others if r.changed]
    if write and elsewhere and not every_file:
        raise FlorError(
            "bad-option", f"--write would also rewrite {', '.join(elsewhere)}: add --all"
        )
    click.echo(result.report(), err=True, nl=False)
    if output and (elsewhere or os.path.isdir(output) or output.endswith(os.sep)):
        _write_tree(output, files, result)
    elif output or write:
        for r in [r for r in result.all if r.changed] if write else [result.entry]:
            with open(output or r.filename, "w", encoding="utf-8") as f:
                f.write(r.source)
    else:
        click.echo(result.diff(), nl=False)


def _write_tree(folder: str, files: ProjectFiles, result: ProjectInstrumented) -> None:
    """The entry script and the project files it imports, rewritten where flor rewrites
    them, under ``folder`` at their places relative to the entry: a tree that runs."""
    rewritten = {r.filename: r.source for r in result.all}
    for path, source in [(result.entry.filename, result.entry.source)] + [
        (f.path, f.source) for f in result.files
    ]:
        target = os.path.join(folder, files.relative(path))
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "w", encoding="utf-8") as out:
            out.write(rewritten.get(path, source))


@click.command(context_settings=dict(SCRIPT_SETTINGS))
@click.option("--name", required=True, help="Experiment name; each run of it is a new version.")
@click.option(
    "--epsilon",
    type=float,
    envvar="FLOR_EPSILON",
    default=DEFAULT_EPSILON,
    show_default="1/15",
    help="Checkpoint overhead budget, as a fraction of training time.",
)
@click.option(
    "--storage",
    envvar="FLOR_STORAGE",
    default=DEFAULT_STORAGE,
    show_default=True,
    help="What the run's checkpoints may keep in the store (10GB, 500MiB, 2GB/h of training, "
    "unlimited); older ones are thinned to fit.",
)
@click.option(
    "-m", "as_module", is_flag=True, help="SCRIPT names a module: run it as `python -m` does."
)
@click.option(
    "--resume",
    is_flag=True,
    help="Go on with the newest run of NAME, SCRIPT and ARGS if it did not finish (killed, "
    "preempted, crashed), from its last checkpoint; else record a new run.",
)
@click.option(
    "--from",
    "fork_from",
    metavar="RUN@ITERATION",
    help="Fork: a new run of today's SCRIPT that goes on from run RUN of NAME (or latest) "
    "at its checkpointed ITERATION; set-up values the script changed (a learning rate) win.",
)
@click.argument("script")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def run(
    edge: Edge,
    name: str,
    epsilon: float,
    storage: str,
    as_module: bool,
    resume: bool,
    fork_from: str | None,
    script: str,
    args: tuple[str, ...],
) -> None:
    """Record SCRIPT [ARGS...]: instrument it in memory and run it as `python SCRIPT ARGS`
    (with -m: `python -m SCRIPT ARGS`).

    Everything after SCRIPT belongs to the script, unchanged. Replay runs it the same way.
    With --resume, the same command line continues a run that did not finish: a requeued
    job's command. With --from RUN@ITERATION, a new run starts from that checkpoint.
    """
    if epsilon <= 0:
        raise FlorError("bad-epsilon", f"epsilon {epsilon} must be positive")
    if resume and fork_from:
        raise FlorError("bad-option", "--resume and --from: a run is resumed or forked, not both")
    budget = parse_storage(storage)
    fork = parse_fork_point(fork_from) if fork_from else None
    module = script if as_module else None
    if module is not None:
        script = module_script(module)
    options = Options(
        mode="record",
        name=check_name(name),
        epsilon=epsilon,
        storage=budget,
        script=os.path.abspath(script),
        module=module,
        argv=(script, *args),
    )
    _record(edge, edge.store(spool=True), options, "" if resume else None, fork)


@click.command()
@click.option("--name", required=True, help="The experiment.")
@click.option("--run", "run_id", help="The run to resume (default: NAME's newest unfinished one).")
@click.option("--epsilon", type=float, envvar="FLOR_EPSILON", default=DEFAULT_EPSILON)
@click.option("--storage", envvar="FLOR_STORAGE", default=DEFAULT_STORAGE)
@click.pass_obj
def resume(edge: Edge, name: str, run_id: str | None, epsilon: float, storage: str) -> None:
    """Go on with a run that did not finish, from its last checkpoint, as it was started:
    its script (as it is now) and arguments, in its working directory.

    The same as `flor run --name NAME --resume SCRIPT ARGS` with the run's own script and
    arguments; --run names a run other than the newest unfinished one.
    """
    if epsilon <= 0:
        raise FlorError("bad-epsilon", f"epsilon {epsilon} must be positive")
    store = edge.store(spool=True)
    meta = _resumed(store, check_name(name), run_id)
    if meta.cwd and os.path.isdir(meta.cwd) and meta.cwd != os.getcwd():
        edge.reporter.say(f"running in {meta.cwd}, where the run started")
        os.chdir(meta.cwd)
    options = Options(
        mode="record",
        name=name,
        epsilon=epsilon,
        storage=parse_storage(storage),
        script=meta.script,
        module=meta.module,
        argv=meta.argv,
    )
    _record(edge, store, options, meta.run_id, None)


def _resumed(store: Store, name: str, run_id: str | None) -> RunMeta:
    """Run ``run_id`` of ``name``, or its newest that did not finish; one-line errors where
    there is none."""
    if run_id is not None or not runs.list_runs(store, name):
        meta = runs.load_run(store, name, run_id).meta  # (which says what is not there)
        if meta.status == "finished":
            raise FlorError("nothing-to-resume", f"run {name}/{run_id} finished: nothing to resume")
        return meta
    for newest in reversed(runs.list_runs(store, name)):
        meta = runs.load_head(store, name, newest).meta
        if meta.status != "finished":
            return meta
    raise FlorError("nothing-to-resume", f"every run of {name} finished: nothing to resume")


def _record(
    edge: Edge,
    store: Store,
    options: Options,
    resume: str | None,
    fork: tuple[str, int] | None,
) -> NoReturn:
    """Record ``options.script`` in this process into ``store``, going on from the run
    ``resume`` names (``""``: the newest unfinished one of the same script and arguments),
    or forking the run ``fork`` names at its iteration; exit with the script's status."""
    from flor.launch.record import Rewritten, instrumented_project, record_here
    from flor.launch.start import loop_tests
    from flor.launch.startup import while_torch_imports

    script, module = options.argv[0] if options.argv else "", options.module
    original = read_script(options.script or script)
    options = replace(options, original=original)
    recorded = _goes_on_from(store, options, edge.reporter, resume, fork)

    def rewrite(reporter: Reporter) -> Rewritten:
        rewritten = instrumented_project(script, original, reporter, module, recorded)
        _refuse_sharded({script: original, **{f.path: f.original for f in rewritten.project}})
        found = loop_tests(options.script, rewritten.source, rewritten.project)
        return replace(rewritten, loop=found)

    rewritten = while_torch_imports(rewrite, edge.reporter)
    options = replace(
        options, source=rewritten.source, project=rewritten.project, spawned=rewritten.spawned
    )
    fork_at = fork[1] if fork else None
    sys.exit(record_here(options, store, edge.reporter, STARTED, rewritten.loop, recorded, fork_at))


def _goes_on_from(
    store: Store,
    options: Options,
    reporter: Reporter,
    resume: str | None,
    fork: tuple[str, int] | None,
) -> runs.RecordedRun | None:
    """The run this recording goes on from, checked before any analysis (its blocks begin
    where they did): with --from, the run forked; with --resume, the newest run of the same
    name, script and arguments if it did not finish; with `flor resume`, the run named.
    Only then is torch imported here, before flor's start-up (its import timed first: the
    script's cost, never charged to flor), not beside it in ``while_torch_imports``."""
    if fork is None and resume is None:
        return None
    from flor.launch.startup import import_torch

    import_torch()
    from flor.launch.resume import fork_point, unfinished

    if fork is not None:
        return fork_point(store, options.name, *fork)
    return unfinished(store, options, reporter.say, os.environ, resume or None)


def _refuse_sharded(files: dict[str, str]) -> None:
    from flor.transform.sharding import sharded_state  # in the rewrite, while torch imports

    for path, source in files.items():
        where = sharded_state(source, path)
        if where is not None:
            raise FlorError(
                "sharded",
                f"{where}: state sharded across ranks (FSDP, torch.distributed.checkpoint) "
                "cannot be recorded yet; run the script without flor",
            )
