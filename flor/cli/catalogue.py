"""The commands on recorded runs: ``ls``, ``show``, ``diff``, ``output``, ``logs``,
``export``, ``gc``, ``push`` and ``pull``."""

from __future__ import annotations

import click

from flor import runs
from flor.cli.edge import RUN_OPTION, Edge
from flor.errors import FlorError
from flor.inputs import check_name
from flor.runs import query, showing


@click.command()
@click.argument("name")
@RUN_OPTION
@click.pass_obj
def diff(edge: Edge, name: str, run_id: str | None) -> None:
    """Show the instrumentation flor applied to a run, then each recorded file (the script
    and the project files it imported) against the file as it is now."""
    store = edge.store()
    click.echo(showing.run_diff(store, runs.load_run(store, name, run_id), _gone), nl=False)


def _gone(path: str) -> None:
    click.echo(f"flor: {path} no longer exists", err=True)


@click.command()
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


@click.command()
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
    click.echo(merged_output(runs.finished_replay(store, run, replay_id)), nl=False)


@click.command()
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
    from flor.runs.transfer import copy_runs

    local = edge.store(edge.settings.home)
    remote = edge.store(_remote_url(edge, url, "--to"), cached=False)
    pushed = copy_runs(local, remote, check_name(name), run_id, _progress)
    if delete_local:
        found = retention.collect(local, lambda r: r.prefix in pushed, checkpoints_only=False)
        retention.delete(local, found, checkpoints_only=False)
        click.echo(f"flor push: freed {found.nbytes / 1e6:.1f} MB of local disk", err=True)


@click.command()
@click.argument("name")
@click.option("--run", "run_id", help="Only this run id (default: every run of NAME).")
@click.option("--from", "url", help="Source store, e.g. s3://BUCKET/PREFIX (default: FLOR_STORE).")
@click.pass_obj
def pull(edge: Edge, name: str, run_id: str | None, url: str | None) -> None:
    """Download the runs of NAME from S3 into the local store (FLOR_HOME)."""
    from flor.runs.transfer import copy_runs

    remote = edge.store(_remote_url(edge, url, "--from"), cached=False)
    copy_runs(remote, edge.store(edge.settings.home), check_name(name), run_id, _progress)


def _remote_url(edge: Edge, url: str | None, option: str) -> str:
    from flor.runs.transfer import remote_url  # its thread pool and logging: push and pull only

    return remote_url(url or edge.url or edge.settings.url, edge.settings.home, option)


def _progress(message: str) -> None:
    click.echo(f"flor: {message}", err=True)


@click.command("ls")
@click.pass_obj
def ls_command(edge: Edge) -> None:
    """List experiments and their runs, newest last."""
    store = edge.store()
    lines = showing.listing(store)
    if not lines:
        click.echo(f"no runs in {store.url}", err=True)
    for line in lines:
        click.echo(line)


@click.command()
@click.argument("name")
@RUN_OPTION
@click.pass_obj
def show(edge: Edge, name: str, run_id: str | None) -> None:
    """Show one run: metadata, iterations, checkpoints and overhead."""
    store = edge.store()
    for key, value in showing.rows(store, runs.load_run(store, name, run_id)):
        click.echo(f"{key:<12} {value}")


@click.command()
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
    click.echo(showing.logged_table(rows, fmt), nl=False)


@click.command()
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
