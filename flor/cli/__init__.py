"""The ``flor`` command. The only package that prints errors and picks exit codes.

Exit codes: 0 success, 2 a user mistake (one line on stderr: ``flor: error: ...``).
``edge`` holds what every command shares; ``record`` has ``instrument`` and ``run``,
``replay`` the replays, ``catalogue`` the commands on recorded runs.

Imports: flor.errors, flor.inputs, flor.launch, flor.replay, flor.runs, flor.runtime.process,
flor.sources, flor.store, flor.transform.
"""

from __future__ import annotations

import click

from flor.cli import catalogue, record
from flor.cli import replay as replaying
from flor.cli.edge import Commands, Edge
from flor.launch import process_end


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


for command in (
    record.instrument,
    record.run,
    record.resume,
    replaying.replay,
    catalogue.diff,
    catalogue.gc,
    catalogue.output,
    catalogue.push,
    catalogue.pull,
    catalogue.ls_command,
    catalogue.show,
    catalogue.logs,
    catalogue.export,
):
    cli.add_command(command)


def main() -> None:
    """The ``flor`` command. It ends its process itself (``process_end``): a process that
    imported torch spends a second in Python's teardown, a large part of a fast replay."""
    try:
        cli()
        status = 0
    except SystemExit as e:
        status = process_end.exit_status(e.code)
    process_end.end(status)
