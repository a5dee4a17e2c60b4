"""The ``flor`` command. The only module that prints errors and picks exit codes.

Exit codes: 0 success, 2 a user mistake (one line on stderr: ``flor: error: ...``).
"""

from __future__ import annotations

import csv
import datetime
import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import click

from flor.errors import FlorError
from flor.runtime import query, runs
from flor.runtime.context import DEFAULT_EPSILON, Options, activate, check_name, parse_segment
from flor.runtime.execfile import read_script
from flor.store import default_home, open_store
from flor.transform import instrument as instrument_source
from flor.transform.edits import training_edits

SCRIPT_SETTINGS = {"ignore_unknown_options": True, "allow_interspersed_args": False}
RUN_OPTION = click.option("--run", "run_id", help="Run id (default: the latest run of NAME).")

F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FlorError as e:
            click.echo(f"flor: error: {e.message}", err=True)
            sys.exit(e.exit_code)

    return wrapper  # type: ignore[return-value]


@click.group()
@click.version_option(package_name="flor")
@click.option(
    "--store",
    envvar="FLOR_STORE",
    help="Where runs live: a folder or s3://BUCKET/PREFIX (default: FLOR_HOME, ~/.flor).",
)
def cli(store: str | None) -> None:
    """flor: hindsight logging for PyTorch training.

    Runs live under FLOR_HOME (default ~/.flor), or in the store that --store or
    FLOR_STORE names (s3://BUCKET/PREFIX: S3 behind a local write-back cache).
    """
    if store:  # the processes flor starts (the script, replay workers) inherit it
        os.environ["FLOR_STORE"] = store


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


@cli.command()
@click.argument("script")
@click.option("-o", "--output", help="Write the instrumented script here.")
@click.option("--write", is_flag=True, help="Rewrite SCRIPT in place.")
@one_line_errors
def instrument(script: str, output: str | None, write: bool) -> None:
    """Rewrite SCRIPT for flor: wrap its main loop in flor.it and its training in a SkipBlock.

    Prints the unified diff on stdout and the decisions (main loop, each block and
    its state, warnings) on stderr. Add `# flor: skip` above a loop, or
    `# flor: skip-file` at the top of a file, to opt out.
    """
    result = instrument_source(read_script(script), script)
    if result.error:
        raise FlorError("syntax", f"{script}:{result.error}")
    click.echo(result.report(), err=True, nl=False)
    if output or write:
        target = output or script
        with open(target, "w", encoding="utf-8") as f:
            f.write(result.source)
    else:
        click.echo(result.diff(), nl=False)


def _rewrite(script: str, original: str) -> str:
    """The instrumented script; unchanged, with the reasons on stderr, where flor cannot
    rewrite it (python then reports a real syntax error itself, exactly as it would)."""
    result = instrument_source(original, script)
    if result.error:
        click.echo(f"flor: warning: {script}:{result.error}; running it unmodified", err=True)
        return original
    for line in result.report().splitlines():
        click.echo(f"flor: {line}", err=True)
    return result.source


@cli.command(context_settings=SCRIPT_SETTINGS)
@click.option("--name", required=True, help="Experiment name; each run of it is a new version.")
@click.option(
    "--epsilon",
    type=float,
    envvar="FLOR_EPSILON",
    default=DEFAULT_EPSILON,
    show_default="1/15",
    help="Checkpoint overhead budget, as a fraction of training time.",
)
@click.argument("script")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@one_line_errors
def run(name: str, epsilon: float, script: str, args: tuple[str, ...]) -> None:
    """Record SCRIPT [ARGS...]: instrument it in memory and run it as `python SCRIPT ARGS`.

    Everything after SCRIPT belongs to the script, unchanged.
    """
    from flor.runtime.execfile import run_as_main

    if epsilon <= 0:
        raise FlorError("bad-epsilon", f"epsilon {epsilon} must be positive")
    original = read_script(script)
    source = _rewrite(script, original)
    options = Options(
        mode="record",
        name=check_name(name),
        epsilon=epsilon,
        script=os.path.abspath(script),
        source=source,
        original=original,
        argv=(script, *args),
    )
    from flor.runtime.recorder import Recorder

    session = activate(options)
    assert isinstance(session, Recorder)
    status = run_as_main(script, list(args), source, original)
    session.close(status)
    sys.exit(status or (2 if session.upload_failed else 0))


@cli.command(context_settings=SCRIPT_SETTINGS)
@click.option("--name", required=True, help="Experiment to replay (its latest run by default).")
@click.option("--run", "run_id", help="Replay this run id instead of the latest.")
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
@click.option("--iterations", help="Replay only these iterations (0-based): 9, or 0-4,10.")
@click.option(
    "--verify",
    type=click.IntRange(min=0),
    default=0,
    help="Also re-execute K checkpointed blocks (per segment) and compare with the record.",
)
@click.option(
    "--plan", "show_plan", is_flag=True, help="Print what would run, and an estimate; run nothing."
)
@click.option("--replay-id", hidden=True)
@click.argument("script", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@one_line_errors
def replay(
    name: str,
    run_id: str | None,
    segment: str | None,
    workers: int | None,
    backend: str,
    address: str | None,
    iterations: str | None,
    verify: int,
    show_plan: bool,
    replay_id: str | None,
    script: str | None,
    args: tuple[str, ...],
) -> None:
    """Replay a recorded run with the script as it is now (edited with new prints or logs).

    SCRIPT defaults to the recorded path and ARGS to the recorded arguments. Blocks
    whose code is unchanged are restored from checkpoints instead of re-run.
    Inside a Slurm array job (or under torchrun), the segment comes from
    SLURM_ARRAY_TASK_ID (or RANK and WORLD_SIZE) unless --segment is given.
    """
    from flor.runtime.execfile import run_as_main

    store = open_store()
    run = runs.load_run(store, check_name(name), run_id)
    if script is not None and script.startswith("-"):
        raise FlorError(
            "bad-option", f"unknown option {script}; the script goes before its arguments"
        )
    script = script or run.meta.get("script") or ""
    argv = (
        list(args)
        if args or script != run.meta.get("script")
        else list(run.meta.get("argv", [])[1:])
    )
    if workers and segment:
        raise FlorError("bad-option", "--workers runs every segment; --segment runs one: pick one")
    if address and backend != "ray":
        raise FlorError("bad-option", "--address names a Ray cluster: add --backend ray")
    if backend == "ray" and not workers:
        raise FlorError("bad-option", "--backend ray runs the segments of --workers K: say K")
    if not workers and not segment:
        from flor.runtime.cluster import segment_from_env

        assigned = segment_from_env()
        if assigned is not None:
            segment, replay_id = assigned.segment, replay_id or assigned.replay_id
            click.echo(f"flor: replaying segment {segment} (from {assigned.source})", err=True)
    original = read_script(script)
    source = _rewrite(script, original) if run.meta.get("instrumented") else original
    _warn_training_edits(store, run, original, source, script)
    options = Options(
        mode="replay",
        name=name,
        run_id=run.run_id,
        segment=parse_segment(segment or f"1/{workers or 1}"),
        iterations=iterations,
        script=os.path.abspath(script),
        source=source,
        original=original,
        replay_id=replay_id or runs.new_id(),
        verify=verify,
    )
    from flor.runtime.plan import check_segments  # torch-free: --workers forks before torch

    check_segments(run, options.segment[1])
    if show_plan:
        _print_plan(run, options, workers or 1)
        return
    if workers:
        ray = (address or "") if backend == "ray" else None
        sys.exit(_replay_parallel(store, run, options, workers, script, argv, ray))
    from flor.runtime.replayer import Replayer

    session = activate(options)
    assert isinstance(session, Replayer)
    status = run_as_main(script, argv, source, original)
    session.close()
    sys.exit(status or (2 if session.upload_failed else 0))


def _warn_training_edits(
    store: Any, run: runs.RecordedRun, original: str, source: str, script: str
) -> None:
    try:
        recorded = runs.recorded_original(store, run)
    except KeyError:
        return
    for note in training_edits(recorded, original, source, script):
        click.echo(f"flor: warning: {script}:{note.line}: {note.message}", err=True)


def _replay_parallel(
    store: Any,
    run: runs.RecordedRun,
    options: Options,
    workers: int,
    script: str,
    argv: list[str],
    ray_address: str | None,
) -> int:
    """Replay every segment at once (local processes, or Ray tasks when ``ray_address``
    is not None; "" means Ray's default); print the merged output, report failures."""
    from flor.replay.merge import merged_output

    prefix = f"{run.prefix}/replays/{options.replay_id}"
    on_ray = ray_address is not None

    def worker_args(index: int) -> list[str]:
        extra = ["--iterations", options.iterations] if options.iterations else []
        extra += ["--verify", str(options.verify)] if options.verify else []
        where = os.path.basename(script) if on_ray else script  # Ray: in the shipped folder
        return [
            "replay",
            "--name",
            run.name,
            "--run",
            run.run_id,
            "--segment",
            f"{index}/{workers}",
            "--replay-id",
            str(options.replay_id),
            *extra,
            where,
            *argv,
        ]

    def progress(message: str) -> None:
        click.echo(f"flor: {message}", err=True)

    if on_ray:
        from flor.replay.ray_backend import run_segments_on_ray

        results, failures = run_segments_on_ray(
            worker_args,
            lambda i: f"{prefix}/segment-{i}-of-{workers}.json",
            workers,
            ray_address or None,
            os.path.dirname(os.path.abspath(script)),
            progress,
        )
    else:
        from flor.replay.local import run_segments

        failures = run_segments(worker_args, workers, workers, progress)
        results = runs.replay_results(store, run.prefix, str(options.replay_id))
    click.echo(merged_output(results), nl=False)
    for f in failures:
        tail = "\n".join(f.stderr.strip().splitlines()[-15:])
        click.echo(
            f"flor: error: segment {f.index}/{workers} failed (exit status {f.exit_status}):\n{tail}",
            err=True,
        )
    return 1 if failures else 0


def _print_plan(run: runs.RecordedRun, options: Options, count: int) -> None:
    from flor.runtime.plan import DEAD
    from flor.runtime.replayer import plan_replay

    total_all = 0.0
    full = sum(run.timings.values())
    click.echo(
        f"replay of {run.name}/{run.run_id}: {run.iterations} iterations recorded, "
        f"checkpoints at {_ranges(sorted(run.commits))}"
    )
    segments = [options.segment] if count == 1 else [(i, count) for i in range(1, count + 1)]
    for index, n in segments:
        decided = plan_replay(
            run, options.source or "", options.script or "", replace(options, segment=(index, n))
        )
        probed = ", ".join(sorted(decided.probed)) or "none"
        click.echo(
            f"segment {index}/{n}: iterations {_ranges(sorted(decided.live))}; probed blocks: {probed}"
        )
        seconds = 0.0
        for g, action in enumerate(decided.plan.actions):
            if action == DEAD:
                continue
            skipped = g in decided.plan.entries or (g in run.commits and not decided.probed)
            block = "restore" if skipped else "execute"
            it_time = run.timings.get(g, 0.0)
            seconds += it_time - run.block_timings.get(g, 0.0) if skipped else it_time
            click.echo(f"  iteration {g:>5}  {action:<5}  block {block}")
        click.echo(
            f"  estimate {seconds:.1f}s of training-loop time (the recorded run took {full:.1f}s)"
        )
        total_all = max(total_all, seconds)
    if count > 1:
        click.echo(f"with {count} workers: about {total_all:.1f}s (the slowest segment)")


@cli.command()
@click.argument("name")
@RUN_OPTION
@one_line_errors
def diff(name: str, run_id: str | None) -> None:
    """Show the instrumentation flor applied to a run, then the recorded script vs the current one."""
    import difflib

    store = open_store()
    run = runs.load_run(store, name, run_id)
    script = run.meta.get("script") or ""
    recorded = runs.recorded_original(store, run)
    if run.meta.get("instrumented"):
        click.echo(
            "".join(
                difflib.unified_diff(
                    recorded.splitlines(True),
                    run.source.splitlines(True),
                    script,
                    f"{script} (instrumented)",
                )
            ),
            nl=False,
        )
    try:
        current = read_script(script)
    except FlorError:
        click.echo(f"flor: {script} no longer exists", err=True)
        return
    changes = "".join(
        difflib.unified_diff(
            recorded.splitlines(True),
            current.splitlines(True),
            f"{script} (recorded)",
            f"{script} (now)",
        )
    )
    click.echo(changes or f"# {script} is unchanged since the run\n", nl=False)


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
@one_line_errors
def gc(
    keep: int | None,
    older_than: float | None,
    checkpoints_only: bool,
    name: str | None,
    dry_run: bool,
) -> None:
    """Delete old runs (or only their checkpoints) by a retention rule, reporting bytes freed."""
    from flor.runtime import retention

    if keep is None and older_than is None:
        raise FlorError("no-rule", "say what to delete: --keep N and/or --older-than DAYS")
    store = open_store()
    found = retention.select(store, keep, older_than, checkpoints_only, name)
    if not dry_run:
        retention.delete(store, found, checkpoints_only)
    verb = "would free" if dry_run else "freed"
    what = "checkpoints of " if checkpoints_only else ""
    click.echo(f"flor gc: {verb} {found.nbytes / 1e6:.1f} MB from {what}{len(found.keys)} runs")


@cli.command()
@click.argument("name")
@RUN_OPTION
@click.option("--replay", "replay_id", help="Replay id (default: the latest replay).")
@one_line_errors
def output(name: str, run_id: str | None, replay_id: str | None) -> None:
    """Print what a replay printed, its segments merged in iteration order.

    For replays whose segments ran as separate jobs: a Slurm array's tasks share
    the replay id slurm-JOBID, torchrun's ranks torchrun-RUNID.
    """
    from flor.replay.merge import merged_output

    store = open_store()
    run = runs.load_run(store, check_name(name), run_id)
    replays = store.children(f"{run.prefix}/replays")
    if not replays:
        raise FlorError("no-replay", f"run {run.name}/{run.run_id} has not been replayed")
    if replay_id is not None and replay_id not in replays:
        raise FlorError("no-replay", f"no replay {replay_id!r} (replays: {', '.join(replays)})")
    by_id = {
        r: runs.replay_results(store, run.prefix, r)
        for r in ([replay_id] if replay_id else replays)
    }
    replay_id = replay_id or max(  # the last to finish; ids sort by start time
        by_id, key=lambda r: (max((s.get("finished", 0) for s in by_id[r]), default=0), r)
    )
    results = by_id[replay_id]
    count = results[0]["segment"][1] if results else 0
    missing = sorted(set(range(1, count + 1)) - {r["segment"][0] for r in results})
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
@one_line_errors
def push(name: str, run_id: str | None, url: str | None, delete_local: bool) -> None:
    """Upload the runs of NAME from the local store (FLOR_HOME) to S3."""
    from flor.runtime import retention

    local = open_store(default_home())
    remote = open_store(_remote_url(url, "--to"), cached=False)
    pushed = _copy_runs(local, remote, name, run_id)
    if delete_local:
        found = retention.collect(local, lambda r: r.prefix in pushed, checkpoints_only=False)
        retention.delete(local, found, checkpoints_only=False)
        click.echo(f"flor push: freed {found.nbytes / 1e6:.1f} MB of local disk", err=True)


@cli.command()
@click.argument("name")
@click.option("--run", "run_id", help="Only this run id (default: every run of NAME).")
@click.option("--from", "url", help="Source store, e.g. s3://BUCKET/PREFIX (default: FLOR_STORE).")
@one_line_errors
def pull(name: str, run_id: str | None, url: str | None) -> None:
    """Download the runs of NAME from S3 into the local store (FLOR_HOME)."""
    _copy_runs(
        open_store(_remote_url(url, "--from"), cached=False),
        open_store(default_home()),
        name,
        run_id,
    )


def _remote_url(url: str | None, option: str) -> str:
    url = url or os.environ.get("FLOR_STORE")
    if not url:
        raise FlorError("no-store", f"say where: {option} s3://BUCKET/PREFIX, or set FLOR_STORE")
    if os.path.abspath(url) == os.path.abspath(default_home()):
        raise FlorError("same-store", f"{url} is the local store itself")
    return url


def _copy_runs(src: Any, dst: Any, name: str, run_id: str | None) -> set[str]:
    """Copy run ``run_id`` (default: all) of ``name``; return the prefixes copied."""
    from flor.runtime.transfer import copy_run

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
@one_line_errors
def ls_command() -> None:
    """List experiments and their runs, newest last."""
    store = open_store()
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
                f"{name:<20} {run_id:<24} {_when(s.get('started')):<19} {s['iterations']:>5} "
                f"{s['bytes'] / 1e6:>7.1f}MB  {status}"
            )


@cli.command()
@click.argument("name")
@RUN_OPTION
@one_line_errors
def show(name: str, run_id: str | None) -> None:
    """Show one run: metadata, iterations, checkpoints and overhead."""
    store = open_store()
    run = runs.load_run(store, name, run_id)
    s = query.summary(store, run)
    rows = [
        ("run", f"{name}/{run.run_id}"),
        ("script", s.get("script")),
        ("argv", " ".join(s.get("argv", []))),
        ("started", _when(s.get("started"))),
        ("ended", _when(s.get("ended"))),
        ("status", s.get("status") if s["complete"] else "incomplete (killed?)"),
        ("iterations", s["iterations"]),
        ("checkpoints", f"{len(s['committed'])} at iterations {_ranges(s['committed'])}"),
        ("overhead", f"{s.get('overhead', 0):.2%} (budget {s.get('epsilon', 0):.2%})"),
        ("size", _size_line(s)),
        ("numerics", json.dumps(s.get("numerics", {}))),
        ("replays", ", ".join(s["replays"]) or "-"),
    ]
    for key, value in rows:
        click.echo(f"{key:<12} {value}")


def _size_line(s: dict[str, Any]) -> str:
    line = f"{s['bytes'] / 1e6:.1f} MB"
    if s["checkpoint_bytes"]:
        line += (
            f" (checkpoints hold {s['checkpoint_bytes'] / 1e6:.1f} MB; "
            f"deduplication saved {s['saved_bytes'] / 1e6:.1f} MB)"
        )
    return line


def _ranges(values: list[int]) -> str:
    out: list[str] = []
    for v in values:
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = out[-1].split("-")[0] + f"-{v}"
        else:
            out.append(str(v))
    return ",".join(out) or "none"


@cli.command()
@click.argument("name")
@RUN_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table")
@click.option(
    "--plot", "plot_name", metavar="VALUE", help="Write a PNG line plot of VALUE per iteration."
)
@click.option("-o", "--output", help="Where --plot writes (default: NAME-VALUE.png).")
@one_line_errors
def logs(
    name: str, run_id: str | None, fmt: str, plot_name: str | None, output: str | None
) -> None:
    """Values from flor.log, recorded and replayed, per iteration."""
    store = open_store()
    run = runs.load_run(store, name, run_id)
    rows = query.logged_values(store, name, run.run_id)
    if plot_name:
        path = output or f"{name}-{plot_name}.png"
        from flor.plot import plot_values

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


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
