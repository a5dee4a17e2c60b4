"""The ``flor`` command. The only module that prints errors and picks exit codes."""

from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="flor")
def cli() -> None:
    """flor: hindsight logging for PyTorch training."""


def main() -> None:
    cli()
