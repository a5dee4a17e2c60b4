"""Standard output and error, tagged by iteration (and block) as they pass through.

The stream passes writes through unchanged, except while ``quiet`` (a replay
rebuilding state, or past the end of its segment). It keeps what it passed
through in buckets: ``pre`` (before the first iteration), one per iteration
(all it printed, in order), one per block run inside an iteration (that part
again), and ``post``. Recording keeps them so a
replay can print what a skipped block printed; parallel replays merge
segments from them.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from typing import Any, TextIO

CURRENT = -1  # a bucket: the iteration the stream's ``current`` says, when written to


class TaggedStream(io.TextIOBase):
    def __init__(self, stream: TextIO, keep: bool, follows: TaggedStream | None = None) -> None:
        """``follows``: the stream whose bucket this one's writes go to (stderr, stdout's)."""
        self.stream = stream
        self.keep = keep
        self.quiet = False
        self.follows = follows
        # Where the next write goes: a name, an iteration, or (iteration, block, occurrence)
        # for a block's text, formatted only when something is written; ``CURRENT``: the
        # session's iteration, as ``current`` says (a recording's fast iterations set none).
        self.bucket: str | int | tuple[int, str, int] = "pre"
        self.current: Callable[[], str | int] = lambda: "pre"
        self.buckets: dict[str, list[str]] = {}

    def write_untagged(self, s: str) -> int:
        """Passed through, not kept: flor's own lines (the ``Reporter``'s), never replayed."""
        return len(s) if self.quiet else self.stream.write(s)

    def write(self, s: str) -> int:
        if self.quiet:
            return len(s)
        if self.keep:
            source = self if self.follows is None else self.follows
            tag = source.bucket
            if tag == CURRENT:
                tag = source.current()
            if type(tag) is tuple:  # the iteration's text stays whole, in order: a replay
                iteration, block, occurrence = tag  # may echo it
                self.buckets.setdefault(f"{iteration}:{block}/{occurrence}", []).append(s)
                self.buckets.setdefault(str(iteration), []).append(s)
            else:
                self.buckets.setdefault(str(tag), []).append(s)
        return self.stream.write(s)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def text(self) -> dict[str, str]:
        return {k: "".join(v) for k, v in self.buckets.items()}

    def take_iterations(self, up_to: int) -> dict[str, str]:
        """Remove and return the text of iterations ``<= up_to`` (already committed):
        buckets ``"ITER"`` and, for what a block printed, ``"ITER:BLOCK/OCCURRENCE"``."""
        keys = [
            k for k in self.buckets if k.split(":")[0].isdigit() and int(k.split(":")[0]) <= up_to
        ]
        return {k: "".join(self.buckets.pop(k)) for k in keys}


class Streams:
    """``sys.stdout`` and ``sys.stderr`` tagged while a session runs (stderr in stdout's
    buckets), and put back when it closes: whoever starts the session installs them, the
    session releases them. A recording and a replay keep both (``keep_stderr``: a replay's
    segments are merged); what only restores (a resume's first half), stdout alone."""

    def __init__(self, keep_stderr: bool) -> None:
        self._original = (sys.stdout, sys.stderr)
        self.stdout = TaggedStream(sys.stdout, keep=True)
        self.stderr = TaggedStream(sys.stderr, keep=keep_stderr, follows=self.stdout)
        sys.stdout, sys.stderr = self.stdout, self.stderr

    def release(self) -> None:
        """The process's own streams again, where nobody replaced ours meanwhile."""
        if sys.stdout is self.stdout:
            sys.stdout = self._original[0]
        if sys.stderr is self.stderr:
            sys.stderr = self._original[1]
