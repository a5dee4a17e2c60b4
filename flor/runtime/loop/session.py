"""What recording and replaying have in common: loop, iteration and block bookkeeping.

Iterations are numbered globally across the ``flor.it`` loops of a run. A
block is identified by its name and its occurrence within the iteration, so a
block that runs twice per iteration is two blocks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from flor.errors import FlorError
from flor.runtime.journal.jsonable import to_jsonable
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.runtime.state.scope import Frame
from flor.store import Store

if TYPE_CHECKING:
    from flor.runs.records import SegmentResult
    from flor.runtime.trackers.ledger import Ledger


def as_iterator(iterable: Iterable[Any] | Callable[[], bool]) -> tuple[Iterator[Any], bool]:
    """An iterator over the loop's values; a callable is a ``while`` condition."""
    if callable(iterable) and not hasattr(iterable, "__iter__"):
        cond = iterable

        def while_true() -> Iterator[int]:
            i = 0
            while cond():
                yield i
                i += 1

        return while_true(), True
    return iter(iterable), False


class Session:
    def __init__(self, options: Options, store: Store, reporter: Reporter) -> None:
        from flor.runtime.state import loader_position

        loader_position.install()  # before the script creates its DataLoader iterators
        self.options = options
        self.store = store
        self.reporter = reporter
        self.iteration: int | None = None  # global index of the open iteration
        self.next_iteration = 0
        self.loops = 0
        self.logs: list[dict[str, Any]] = []
        self._occurrences: dict[str, int] = {}
        self._open_block: tuple[str, int] | None = None
        self.callbacks: set[str] = set()  # the functions flor.callback notes (api.callback)
        self._called: dict[str, set[str]] = {}  # block name -> those it ran, since last taken
        self.upload_failed = False  # set by close when a remote store did not get everything
        self.diverged = ""  # set by a replay's close: where a re-executed block left the record
        self.result: SegmentResult | None = None  # set by a replay's close: what it stored
        self.trackers: Ledger | None = None  # what the script's trackers are sent (trackers)

    # -- what flor.it / SkipBlock / flor.log call -------------------------------
    def loop(self, iterable: Any) -> Iterator[Any]:
        if self.iteration is not None:
            self.warn_once("nested", "flor.it inside a flor.it iteration is a plain loop")
            return as_iterator(iterable)[0]
        return self.main_loop(iterable)

    def main_loop(self, iterable: Any) -> Iterator[Any]:
        raise NotImplementedError

    # ``frame``: the script's frame that called ``SkipBlock``; None: the caller of the
    # method that called this one (``caller``), fetched only where needed: a recorded
    # iteration that takes no checkpoint needs none.
    def block_start(self, name: str, probed: bool, frame: Frame | None) -> bool:
        raise NotImplementedError

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame | None
    ) -> tuple[Any, ...]:
        raise NotImplementedError

    def close(self, exit_status: int | None = None) -> None:
        """Flush and store what the session produced (also at exit; once)."""
        raise NotImplementedError

    def where(self) -> str | None:
        """Where the session was, for an exception the user's code raised (replay says)."""
        return None

    def log(self, name: str, value: Any, step: int | None) -> None:
        entry = {"iteration": self.iteration, "name": name, "value": to_jsonable(value)}
        if step is not None:
            entry["step"] = step
        self.logs.append(entry)

    def note_call(self, name: str) -> None:
        """Callback ``name`` runs: in the open block, if one is."""
        if self._open_block is not None:
            self._called.setdefault(self._open_block[0], set()).add(name)

    def take_called(self) -> dict[str, tuple[str, ...]]:
        """Block name -> the callbacks it ran since the last call."""
        called, self._called = self._called, {}
        return {block: tuple(sorted(names)) for block, names in called.items()}

    # -- bookkeeping -------------------------------------------------------------
    def begin_iteration(self, iteration: int) -> None:
        self.iteration = iteration
        if self._occurrences:
            self._occurrences.clear()

    def advance(self) -> int:
        """End the open iteration, if any (``end_iteration``), and begin the next: one call
        where a loop of short steps would make two."""
        if self.iteration is not None:
            if self._open_block is not None:
                self.end_iteration()  # raises: the block was not ended
            self.next_iteration += 1
        self.iteration = iteration = self.next_iteration
        if self._occurrences:
            self._occurrences.clear()
        return iteration

    def end_iteration(self) -> None:
        self.iteration = None
        self.next_iteration += 1
        if self._open_block is not None:
            unfinished, self._open_block = self._open_block, None
            raise FlorError(
                "no-end",
                f"SkipBlock.step_into({unfinished[0]!r}) was not followed by SkipBlock.end()",
            )

    def open_block(self, name: str) -> tuple[str, int]:
        if self._open_block is not None:
            raise FlorError(
                "nested-block",
                f"SkipBlock {name!r} started inside SkipBlock {self._open_block[0]!r}",
            )
        occurrences = self._occurrences
        occurrence = occurrences[name] = occurrences.get(name, -1) + 1
        block = self._open_block = (name, occurrence)
        return block

    def close_block(self) -> tuple[str, int]:
        block = self._open_block
        if block is None:
            raise FlorError("no-start", "SkipBlock.end() without SkipBlock.step_into()")
        self._open_block = None
        return block

    def warn_once(self, key: str, message: str) -> None:
        self.reporter.warn_once(key, message)

    def flush_store(self) -> bool:
        """Wait for a remote store's uploads, with progress; False (and one error line
        saying how to finish) if some never made it."""
        try:
            self.store.flush(self.reporter.say)
        except FlorError as e:
            self.reporter.error(e.message)
            return False
        return True


def numeric_environment() -> dict[str, Any]:
    """What changes printed digits: torch threads, determinism, device (a replay matches them)."""
    import torch

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "cuda": torch.cuda.is_available(),
    }
    if env["cuda"]:
        env["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    np = sys.modules.get("numpy")
    if np is not None:
        env["numpy"] = np.__version__
    return env
