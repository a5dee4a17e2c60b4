"""Standard output, tagged by iteration (and block) as it passes through.

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
from typing import Any, TextIO


class TaggedStream(io.TextIOBase):
    def __init__(self, stream: TextIO, keep: bool) -> None:
        self.stream = stream
        self.keep = keep
        self.quiet = False
        self.bucket: str = "pre"
        self.buckets: dict[str, list[str]] = {}

    def write(self, s: str) -> int:
        if self.quiet:
            return len(s)
        if self.keep:
            self.buckets.setdefault(self.bucket, []).append(s)
            iteration, block, _ = self.bucket.partition(":")
            if block:  # the iteration's text stays whole, in order: a replay may echo it
                self.buckets.setdefault(iteration, []).append(s)
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
