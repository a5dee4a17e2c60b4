"""What every ``flor`` command shares: the store the user named, one-line errors, and the
options several commands take."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import click

from flor import runs
from flor.errors import FlorError
from flor.runtime.process.reporter import Reporter
from flor.store import Store, StoreSettings

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
