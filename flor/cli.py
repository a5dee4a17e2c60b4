"""The ``flor`` command. The only module that prints errors and picks exit codes.

Exit codes: 0 success, 2 a user mistake (one line on stderr: ``flor: error: ...``).
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import click

from flor import runs
from flor.errors import DIVERGED, SKIPPED, FlorError
from flor.inputs import DEFAULT_EPSILON, DEFAULT_STORAGE, check_name, parse_storage, read_script
from flor.launch import process_end
from flor.launch.project_files import ProjectFiles, module_script
from flor.runs import layout, query, showing
from flor.runs.showing import when
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.sources import ENTRY, SourceFile
from flor.store import Store, StoreSettings
from flor.transform.report import ProjectInstrumented
from flor.transform.sharding import sharded_state

if TYPE_CHECKING:
    from flor.launch.across import Across, Replayed

STARTED = time.perf_counter()  # flor run charges its own start-up to the run's budget

SCRIPT_SETTINGS = MappingProxyType(
    {"ignore_unknown_options": True, "allow_interspersed_args": False}
)
RUN_OPTION = click.option("--run", "run_id", help="Run id (default: the latest run of NAME).")


@dataclass
class Edge:
    """What every command shares: the store the user named, read from the environment once."""

    url: str | None  # --store
    reporter: Reporter = field(default_factory=Reporter)
    _settings: StoreSettings | None = None

    @property
    def settings(self) -> StoreSettings:
        if self._settings is None:
            self._settings = StoreSettings.from_env(os.environ)
        return self._settings

    def store(self, url: str | None = None, cached: bool = True, spool: bool = False) -> Store:
        return runs.open_store(url or self.url, self.settings, cached, self.reporter.warn, spool)


class Commands(click.Group):
    """Every command's mistakes as one line and an exit status, no traceback: a FlorError,
    and what click would say in three lines (a missing option, a bad value)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FlorError as e:
            click.echo(f"flor: error: {e.message}", err=True)
            sys.exit(e.exit_code)
        except click.UsageError as e:
            click.echo(f"flor: error: {e.format_message()}", err=True)
            sys.exit(e.exit_code)


@click.group(cls=Commands)
@click.version_option(package_name="flor")
@click.option(
    "--store",
    help="Where runs live: a folder or s3://BUCKET/PREFIX (default: FLOR_STORE, FLOR_HOME, ~/.flor).",
)
@click.pass_context
def cli(ctx: click.Context, store: str | None) -> None:
    """flor: hindsight logging for PyTorch training.

    Runs live under FLOR_HOME (default ~/.flor), or in the store that --store or
    FLOR_STORE names (s3://BUCKET/PREFIX: S3 behind a local write-back cache).
    """
    ctx.obj = Edge(store)


@cli.command()
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


@cli.command(context_settings=dict(SCRIPT_SETTINGS))
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
@click.argument("script")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def run(
    edge: Edge,
    name: str,
    epsilon: float,
    storage: str,
    as_module: bool,
    script: str,
    args: tuple[str, ...],
) -> None:
    """Record SCRIPT [ARGS...]: instrument it in memory and run it as `python SCRIPT ARGS`
    (with -m: `python -m SCRIPT ARGS`).

    Everything after SCRIPT belongs to the script, unchanged. Replay runs it the same way.
    """
    from flor.launch.record import Rewritten, instrumented_project, record_here
    from flor.launch.start import loop_tests
    from flor.launch.startup import while_torch_imports

    if epsilon <= 0:
        raise FlorError("bad-epsilon", f"epsilon {epsilon} must be positive")
    budget = parse_storage(storage)
    module = script if as_module else None
    if module is not None:
        script = module_script(module)
    original = read_script(script)

    def rewrite(reporter: Reporter) -> Rewritten:
        rewritten = instrumented_project(script, original, reporter, module)
        _refuse_sharded({script: original, **{f.path: f.original for f in rewritten.project}})
        found = loop_tests(os.path.abspath(script), rewritten.source, rewritten.project)
        return replace(rewritten, loop=found)

    rewritten = while_torch_imports(rewrite, edge.reporter)
    options = Options(
        mode="record",
        name=check_name(name),
        epsilon=epsilon,
        storage=budget,
        script=os.path.abspath(script),
        module=module,
        source=rewritten.source,
        original=original,
        project=rewritten.project,
        spawned=rewritten.spawned,
        argv=(script, *args),
    )
    store = edge.store(spool=True)
    sys.exit(record_here(options, store, edge.reporter, STARTED, rewritten.loop))


def _refuse_sharded(files: dict[str, str]) -> None:
    for path, source in files.items():
        where = sharded_state(source, path)
        if where is not None:
            raise FlorError(
                "sharded",
                f"{where}: state sharded across ranks (FSDP, torch.distributed.checkpoint) "
                "cannot be recorded yet; run the script without flor",
            )


@cli.command(context_settings=dict(SCRIPT_SETTINGS))
@click.option("--name", required=True, help="Experiment to replay (its latest run by default).")
@click.option("--run", "run_id", help="Replay this run id instead of the latest.")
@click.option(
    "--runs",
    "runs_spec",
    help="Replay these runs, each at its own code version, with the edit carried to it: "
    "all, latest:N, since:YYYY-MM-DD, or ids separated by commas.",
)
@click.option(
    "--show-edits",
    is_flag=True,
    help="With --runs: print, per version, the diff each run would replay; run nothing.",
)
@click.option("--segment", help="Replay only segment I of N (e.g. 2/4); for one worker per GPU.")
@click.option(
    "--workers", type=click.IntRange(min=1), help="Replay in K segments at once; merged output."
)
@click.option(
    "--backend",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the --workers segments run: local processes, or Ray tasks.",
)
@click.option(
    "--address",
    help="Ray cluster: auto, HOST:PORT or ray://HOST:PORT (default: RAY_ADDRESS or a local Ray).",
)
@click.option(
    "--iterations",
    envvar="FLOR_ITERATIONS",
    help="Replay only these iterations (0-based): 9, or 0-4,10.",
)
@click.option(
    "--verify",
    type=click.IntRange(min=0),
    default=0,
    help="Also re-execute K checkpointed blocks (per segment) and compare with the record.",
)
@click.option(
    "--restore",
    type=click.Choice(["auto", "always"]),
    default="auto",
    show_default=True,
    envvar="FLOR_RESTORE",
    help="Restore a checkpointed block only where that is faster than running it (auto; "
    "replay measures it), or wherever a checkpoint is (always).",
)
@click.option(
    "--threads",
    help="Torch threads per replay process: N, or auto (the machine's cores / workers). "
    "Default: the recorded count, for bitwise parity with the record.",
)
@click.option(
    "--plan", "show_plan", is_flag=True, help="Print what would run, and an estimate; run nothing."
)
@click.option(
    "--rank",
    type=click.IntRange(min=0),
    help="Of a run recorded by several processes (torchrun): replay this rank's view in one "
    "process (default 0).",
)
@click.option(
    "--segment-from-env",
    is_flag=True,
    help="Under torchrun: each rank replays segment RANK+1 of WORLD_SIZE of a one-process run.",
)
@click.option("--replay-id", hidden=True)
@click.option("--rewritten", hidden=True)  # a worker's: its parent's rewrite (replay/handover)
@click.argument("script", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def replay(
    edge: Edge, /, show_plan: bool, runs_spec: str | None, show_edits: bool, **request: Any
) -> None:
    """Replay a recorded run with the script as it is now (edited with new prints or logs).

    SCRIPT defaults to the recorded path and ARGS to the recorded arguments. Blocks
    whose code is unchanged are restored from checkpoints instead of re-run, where
    restoring is the faster of the two (--restore always: wherever a checkpoint is).
    Inside a Slurm array job, the segment comes from SLURM_ARRAY_TASK_ID unless
    --segment is given. A run recorded under torchrun replays in one process (as
    rank 0, or --rank R) when only its restored state is needed, or under
    `torchrun --nproc_per_node N flor replay` with every rank in step.
    """
    from flor.launch import replay as replaying  # the command is `replay`

    if runs_spec is not None or show_edits:
        sys.exit(_replay_across(edge, runs_spec, show_plan, show_edits, request))
    store = edge.store()
    here = not (request["workers"] or show_plan)  # this process replays: it imports torch
    later = bool(request["workers"]) and not show_plan  # rewritten while the workers start
    prepared = replaying.prepare(
        replaying.ReplayRequest(**request), store, edge.reporter, os.environ, here, not later
    )
    if show_plan:
        click.echo("\n".join(replaying.estimate(prepared)))
        return
    if not prepared.workers:
        sys.exit(replaying.replay_here(prepared, store, edge.reporter))
    done = replaying.replay_in_parallel(prepared, store, edge.settings, edge.reporter)
    click.echo(done.output, nl=False)
    for f in done.failures:
        tail = "\n".join(f.stderr.strip().splitlines()[-15:])
        click.echo(
            f"flor: error: segment {f.index}/{prepared.workers} failed "
            f"(exit status {f.exit_status}):\n{tail}",
            err=True,
        )
    for where in done.diverged:
        edge.reporter.warn(replaying.divergence(where))
    sys.exit(1 if done.failures else DIVERGED if done.diverged else 0)


_ONE_RUN_ONLY = MappingProxyType(
    {
        "run_id": "--run",
        "segment": "--segment",
        "rank": "--rank",
        "segment_from_env": "--segment-from-env",
        "replay_id": "--replay-id",
        "rewritten": "--rewritten",
        "args": "the script's arguments (each run replays with its own)",
    }
)


def _replay_across(
    edge: Edge, spec: str | None, show_plan: bool, show_edits: bool, request: dict[str, Any]
) -> int:
    """``--runs``: the edit carried to each chosen run's version, and replayed there."""
    from flor.launch import across
    from flor.launch.replay import ray_target

    if spec is None:
        raise FlorError("bad-option", "--show-edits shows the edit carried to each of --runs")
    wrong = [shown for k, shown in _ONE_RUN_ONLY.items() if request[k]]
    if wrong:
        raise FlorError(
            "bad-option", f"--runs replays whole runs: {', '.join(wrong)} cannot go with it"
        )
    if request["address"] and request["backend"] != "ray":
        raise FlorError("bad-option", "--address names a Ray cluster: add --backend ray")
    store = edge.store()
    planned = across.plan_across(store, check_name(request["name"]), spec, request["script"])
    if show_edits or show_plan:
        if show_edits:
            lines = across.shown_edits(planned)
        else:
            lines = across.planned(planned, store, request["restore"], request["verify"])
        click.echo("\n".join(lines))
        return 0
    for plan in planned.plans:
        if plan.skipped:
            edge.reporter.warn(
                f"run {plan.run.run_id} (version {plan.version}) skipped: {plan.skipped}"
            )
        for line in [] if plan.skipped else across.training_warnings(plan):
            edge.reporter.warn(line)
    edge.reporter.say(across.base_line(planned))
    address, env = ray_target(request["backend"], request["address"], os.environ)
    workers = across.Workers(request["workers"] or 1, address, env, tuple(_passed_options(request)))
    return _print_across(
        edge, planned, across.replay_across(planned, store, edge.settings, edge.reporter, workers)
    )


def _passed_options(request: dict[str, Any]) -> list[str]:
    """What every run's replay gets of the options given to all of them."""
    passed = ["--iterations", request["iterations"]] if request["iterations"] else []
    passed += ["--verify", str(request["verify"])] if request["verify"] else []
    passed += ["--restore", request["restore"]] if request["restore"] != "auto" else []
    return passed + (["--threads", request["threads"]] if request["threads"] else [])


def _print_across(edge: Edge, planned: Across, done: Replayed) -> int:
    """Each replayed run's output under a header, failures' errors, and the summary line."""
    replayed = [p for p in planned.plans if p.skipped is None and p.run.run_id not in done.failures]
    for plan in planned.plans:
        if plan.skipped is None:
            click.echo(f"==> {plan.run.name}/{plan.run.run_id} (version {plan.version}) <==")
            click.echo(done.outputs.get(plan.run.run_id, ""), nl=False)
        failure = done.failures.get(plan.run.run_id)
        if failure is not None:
            tail = "\n".join(failure.stderr.strip().splitlines()[-15:])
            edge.reporter.error(
                f"run {plan.run.run_id} failed (exit status {failure.exit_status}):\n{tail}"
            )
    skipped = sum(p.skipped is not None for p in planned.plans)
    edge.reporter.say(
        f"{len(replayed)} of {len(planned.plans)} runs replayed, {skipped} skipped, "
        f"{len(done.failures)} failed"
    )
    return 1 if done.failures else SKIPPED if skipped else 0


@cli.command()
@click.argument("name")
@RUN_OPTION
@click.pass_obj
def diff(edge: Edge, name: str, run_id: str | None) -> None:
    """Show the instrumentation flor applied to a run, then each recorded file (the script
    and the project files it imported) against the file as it is now."""
    store = edge.store()
    run = runs.load_run(store, name, run_id)
    script = run.meta.script or ""
    recorded = runs.recorded_original(store, run)
    root = run.meta.cwd if run.meta.module else os.path.dirname(script)  # where paths start
    files = [(script, recorded, run.source if run.meta.instrumented else recorded)]
    files += [(os.path.join(root, f.path), f.original, f.source) for f in run.project]
    for path, original, source in files:
        click.echo(_unified(original, source, path, f"{path} (instrumented)"), nl=False)
    unchanged = []
    for path, original, _ in files:
        try:
            current = read_script(path)
        except FlorError:
            click.echo(f"flor: {path} no longer exists", err=True)
            continue
        changes = _unified(original, current, f"{path} (recorded)", f"{path} (now)")
        click.echo(changes, nl=False)
        if not changes:
            unchanged.append(path)
    if len(unchanged) == len(files):
        what = f"{script} and the {len(files) - 1} project files it imports are"
        click.echo(
            f"# {what if len(files) > 1 else script + ' is'} unchanged since the run\n", nl=False
        )


def _unified(a: str, b: str, old: str, new: str) -> str:
    import difflib

    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), old, new))


@cli.command()
@click.option(
    "--keep", type=click.IntRange(min=0), help="Keep the newest N runs of each experiment."
)
@click.option("--older-than", "older_than", type=float, help="Only runs older than this many days.")
@click.option(
    "--checkpoints-only", is_flag=True, help="Delete checkpoints, keep metadata, logs and output."
)
@click.option("--name", help="Only this experiment.")
@click.option("--dry-run", is_flag=True, help="Report what would be freed; delete nothing.")
@click.pass_obj
def gc(
    edge: Edge,
    keep: int | None,
    older_than: float | None,
    checkpoints_only: bool,
    name: str | None,
    dry_run: bool,
) -> None:
    """Delete old runs (or only their checkpoints) by a retention rule, reporting bytes freed."""
    from flor.runs import retention

    if keep is None and older_than is None:
        raise FlorError("no-rule", "say what to delete: --keep N and/or --older-than DAYS")
    store = edge.store()
    found = retention.select(store, keep, older_than, checkpoints_only, name)
    if not dry_run:
        retention.delete(store, found, checkpoints_only)
    verb = "would free" if dry_run else "freed"
    what = "checkpoints of " if checkpoints_only else ""
    click.echo(f"flor gc: {verb} {found.nbytes / 1e6:.1f} MB from {what}{len(found.keys)} runs")
    if found.recording:
        click.echo(
            f"flor gc: left {', '.join(found.recording)} alone (recording), and every tensor "
            "blob with it: run gc again once it has ended to free the blobs",
            err=True,
        )


@cli.command()
@click.argument("name")
@RUN_OPTION
@click.option("--replay", "replay_id", help="Replay id (default: the latest replay).")
@click.pass_obj
def output(edge: Edge, name: str, run_id: str | None, replay_id: str | None) -> None:
    """Print what a replay printed, its segments merged in iteration order.

    For replays whose segments ran as separate jobs: a Slurm array's tasks share
    the replay id slurm-JOBID, torchrun's ranks torchrun-RUNID.
    """
    from flor.replay.merge import merged_output

    store = edge.store()
    run = runs.load_run(store, check_name(name), run_id)
    replays = store.children(layout.replays_folder(run.prefix))
    if not replays:
        raise FlorError("no-replay", f"run {run.name}/{run.run_id} has not been replayed")
    if replay_id is not None and replay_id not in replays:
        raise FlorError("no-replay", f"no replay {replay_id!r} (replays: {', '.join(replays)})")
    by_id = {
        r: runs.replay_results(store, run.prefix, r)
        for r in ([replay_id] if replay_id else replays)
    }
    replay_id = replay_id or max(  # the last to finish; ids sort by start time
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
    click.echo(merged_output(results), nl=False)


@cli.command()
@click.argument("name")
@click.option("--run", "run_id", help="Only this run id (default: every run of NAME).")
@click.option(
    "--to", "url", help="Destination store, e.g. s3://BUCKET/PREFIX (default: FLOR_STORE)."
)
@click.option(
    "--delete-local", is_flag=True, help="Then free local disk (only once all of it verified)."
)
@click.pass_obj
def push(edge: Edge, name: str, run_id: str | None, url: str | None, delete_local: bool) -> None:
    """Upload the runs of NAME from the local store (FLOR_HOME) to S3."""
    from flor.runs import retention

    local = edge.store(edge.settings.home)
    remote = edge.store(_remote_url(edge, url, "--to"), cached=False)
    pushed = _copy_runs(local, remote, name, run_id)
    if delete_local:
        found = retention.collect(local, lambda r: r.prefix in pushed, checkpoints_only=False)
        retention.delete(local, found, checkpoints_only=False)
        click.echo(f"flor push: freed {found.nbytes / 1e6:.1f} MB of local disk", err=True)


@cli.command()
@click.argument("name")
@click.option("--run", "run_id", help="Only this run id (default: every run of NAME).")
@click.option("--from", "url", help="Source store, e.g. s3://BUCKET/PREFIX (default: FLOR_STORE).")
@click.pass_obj
def pull(edge: Edge, name: str, run_id: str | None, url: str | None) -> None:
    """Download the runs of NAME from S3 into the local store (FLOR_HOME)."""
    _copy_runs(
        edge.store(_remote_url(edge, url, "--from"), cached=False),
        edge.store(edge.settings.home),
        name,
        run_id,
    )


def _remote_url(edge: Edge, url: str | None, option: str) -> str:
    url = url or edge.url or edge.settings.url
    if not url:
        raise FlorError("no-store", f"say where: {option} s3://BUCKET/PREFIX, or set FLOR_STORE")
    if os.path.abspath(url) == os.path.abspath(edge.settings.home):
        raise FlorError("same-store", f"{url} is the local store itself")
    return url


def _copy_runs(src: Any, dst: Any, name: str, run_id: str | None) -> set[str]:
    """Copy run ``run_id`` (default: all) of ``name``; return the prefixes copied."""
    from flor.runs.transfer import copy_run

    ids = [run_id] if run_id else runs.list_runs(src, check_name(name))
    if not ids:
        raise FlorError("no-run", f"no recorded run named {name!r} in {src.url}")
    copied = set()
    for rid in ids:
        run = runs.load_run(src, name, rid)
        copy_run(src, dst, run, lambda m: click.echo(f"flor: {m}", err=True))
        copied.add(run.prefix)
    return copied


@cli.command("ls")
@click.pass_obj
def ls_command(edge: Edge) -> None:
    """List experiments and their runs, newest last."""
    store = edge.store()
    names = runs.list_experiments(store)
    if not names:
        click.echo(f"no runs in {store.url}", err=True)
        return
    click.echo(f"{'NAME':<20} {'RUN':<24} {'STARTED':<19} {'ITERS':>5} {'SIZE':>9}  STATUS")
    for name in names:
        for run_id in runs.list_runs(store, name):
            s = query.summary(store, runs.load_run(store, name, run_id))
            status = s.get("status", "?") if s["complete"] else "incomplete"
            click.echo(
                f"{name:<20} {run_id:<24} {when(s.get('started')):<19} {s['iterations']:>5} "
                f"{s['bytes'] / 1e6:>7.1f}MB  {status}"
            )


@cli.command()
@click.argument("name")
@RUN_OPTION
@click.pass_obj
def show(edge: Edge, name: str, run_id: str | None) -> None:
    """Show one run: metadata, iterations, checkpoints and overhead."""
    store = edge.store()
    for key, value in showing.rows(store, runs.load_run(store, name, run_id)):
        click.echo(f"{key:<12} {value}")


@cli.command()
@click.argument("name")
@RUN_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table")
@click.option(
    "--plot", "plot_name", metavar="VALUE", help="Write a PNG line plot of VALUE per iteration."
)
@click.option("-o", "--output", help="Where --plot writes (default: NAME-VALUE.png).")
@click.pass_obj
def logs(
    edge: Edge, name: str, run_id: str | None, fmt: str, plot_name: str | None, output: str | None
) -> None:
    """Values from flor.log, recorded and replayed, per iteration."""
    store = edge.store()
    run = runs.load_run(store, name, run_id)
    rows = query.logged_values(store, name, run.run_id)
    if plot_name:
        path = output or f"{name}-{plot_name}.png"
        from flor.runs.plot import plot_values

        plot_values(rows, plot_name, f"{name}/{run.run_id}", path)
        click.echo(path)
        return
    if fmt == "json":
        click.echo(json.dumps(rows, indent=1))
    elif fmt == "csv":
        writer = csv.DictWriter(sys.stdout, ["source", "iteration", "step", "name", "value"])
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k) for k in writer.fieldnames})
    else:
        click.echo(f"{'ITER':>5}  {'NAME':<16} {'VALUE':<24} SOURCE")
        for r in rows:
            it = "-" if r["iteration"] is None else r["iteration"]
            click.echo(f"{it:>5}  {r['name']:<16} {json.dumps(r['value']):<24} {r['source']}")


@cli.command()
@click.argument("name")
@click.option(
    "--runs",
    "runs_spec",
    default="all",
    show_default=True,
    help="all, latest:N, since:YYYY-MM-DD, or run ids separated by commas.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["tensorboard", "csv"]),
    default="tensorboard",
    show_default=True,
)
@click.option(
    "-o",
    "--output",
    required=True,
    help="A folder (tensorboard: one run directory per run) or a .csv file.",
)
@click.pass_obj
def export(edge: Edge, name: str, runs_spec: str, fmt: str, output: str) -> None:
    """Write the recorded and hindsight values of NAME's runs for TensorBoard, or as CSV.

    Hindsight values (those a replay logged) appear under hindsight/VALUE beside the
    recorded curves; `tensorboard --logdir OUTPUT` shows them."""
    from flor.runs import export as exporting
    from flor.runs.dataframe import logged_rows
    from flor.runs.versions import select_run_ids

    store = edge.store()
    chosen = set(select_run_ids(store, check_name(name), runs_spec))
    rows = [r for r in logged_rows(store, (name,)) if r["run_id"] in chosen]
    try:
        if fmt == "csv":
            exporting.to_csv(rows, output)
            click.echo(f"flor export: {len(rows)} values of {len(chosen)} runs to {output}")
            return
        written = exporting.to_tensorboard(rows, output)
    except OSError as e:
        raise FlorError("bad-output", f"cannot write {output}: {e.strerror or e}") from None
    click.echo(f"flor export: {len(written)} runs to {output} (tensorboard --logdir {output})")


def main() -> None:
    """The ``flor`` command. It ends its process itself (``process_end``): a process that
    imported torch spends a second in Python's teardown, a large part of a fast replay."""
    try:
        cli()
        status = 0
    except SystemExit as e:
        status = process_end.exit_status(e.code)
    process_end.end(status)


if __name__ == "__main__":
    main()
