"""The one voice a run has on the terminal (the ``flor`` command prints its own output).

A ``Reporter`` is handed to the session, the checkpoint writer and the store's
uploader, so every warning, progress line and error of a run goes through one
object that a caller can capture or silence. It writes to whatever
``sys.stderr`` is when it speaks, so a replay's quiet iterations, which
silence the script's stderr, silence it too.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO, TypeVar

T = TypeVar("T", bound=TextIO)


class Reporter:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream  # None: sys.stderr at the time of writing
        self._said: set[str] = set()
        self._lock = threading.Lock()  # the writer and uploader threads report too

    def write(self, text: str) -> None:
        """Text as it is (a user's traceback)."""
        stream = self._stream or sys.stderr
        write = getattr(stream, "write_untagged", stream.write)  # never kept as the script's
        with self._lock:
            write(text)
            stream.flush()

    def say(self, message: str) -> None:
        """Progress, a summary, a note: ``flor: MESSAGE``."""
        self.write(f"flor: {message}\n")

    def warn(self, message: str) -> None:
        self.say(f"warning: {message}")

    def warn_once(self, key: str, message: str) -> None:
        """Warn unless a warning under ``key`` was already given."""
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        self.warn(message)

    def error(self, message: str) -> None:
        self.say(f"error: {message}")

    # -- a reporter in another process (``startup``): what it said comes back here ------
    def divert(self, stream: T) -> T:
        """Write to ``stream`` from now on; returns it."""
        self._stream = stream
        return stream

    def warned(self) -> frozenset[str]:
        """The keys of the warnings given once."""
        with self._lock:
            return frozenset(self._said)

    def heard(self, keys: frozenset[str]) -> None:
        """Count the warnings another reporter gave once as given here too."""
        with self._lock:
            self._said |= keys
