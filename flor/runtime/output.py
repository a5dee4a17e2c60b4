"""What a replay prints: suppressed while rebuilding state, tagged by iteration.

The stream passes writes through unchanged, except while ``quiet`` (state
being rebuilt, or past the end of the segment). It keeps what it passed
through in buckets: ``pre`` (before the first iteration), one per iteration,
and ``post``; parallel replays merge segments from these buckets.
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
