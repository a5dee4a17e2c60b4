"""One error type for everything a user can get wrong.

The CLI (and the legacy-flag entry point) turn a ``FlorError`` into a single
``flor: error: <message>`` line and a non-zero exit; nothing else prints them.
"""

from __future__ import annotations

DIVERGED = 3
"""Exit status of a replay that ran to the end, but a re-executed block ended in another
state than the record's: what it printed there may not be what a full run prints."""


SKIPPED = 4
"""Exit status of ``flor replay --runs`` where every run the edit could be carried to
replayed, and the others were skipped (each with the reason)."""


class FlorError(Exception):
    """A user-facing failure with a short slug (e.g. ``no-run``) and one-line message."""

    exit_code = 2

    def __init__(self, slug: str, message: str) -> None:
        super().__init__(message)
        self.slug = slug
        self.message = message

    def __str__(self) -> str:
        return self.message


class CorruptCheckpoint(FlorError):
    """A checkpoint whose bytes do not match the checksum its journal entry recorded."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__("corrupt-checkpoint", f"checkpoint {key} is unusable: {why}")


class StoreUnreachable(FlorError):
    """The store's server did not answer; unlike other errors, worth retrying later."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__("store-unreachable", f"cannot reach {url}: {why}")
