"""The storage contract: immutable bytes under string keys.

Keys are ``/``-separated paths relative to the store's root. Writers put data
first and the small journal object that points at it last, so a reader that
lists keys never sees a half-written checkpoint.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass


def _never(key: str) -> bool:
    return False


@dataclass(frozen=True)
class KeyKinds:
    """What a cache may assume of a key; the store's user knows its keys (``runs.layout``).

    The default assumes nothing: every read goes to the source and every put uploads in order.
    """

    immutable: Callable[[str], bool] = _never  # written once: a cache may serve it
    data: Callable[[str], bool] = _never  # pointed at by a later commit: may upload ahead
    content_addressed: Callable[[str], bool] = _never  # its key ends with its SHA-256


class Store(abc.ABC):
    """Bytes under keys. Every ``put`` is atomic: readers see all of it or none."""

    url: str

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically, replacing any previous value."""

    @abc.abstractmethod
    def get(self, key: str) -> bytes:
        """Return the bytes under ``key``; raise ``KeyError`` if there are none."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        """Whether ``key`` holds a value."""

    @abc.abstractmethod
    def keys(self, prefix: str) -> Iterator[str]:
        """Yield every key under the folder ``prefix`` (recursively), sorted."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""

    @abc.abstractmethod
    def size(self, key: str) -> int:
        """Size of the value under ``key`` in bytes."""

    def children(self, prefix: str) -> list[str]:
        """Names directly under the folder ``prefix`` (files and folders), sorted."""
        base = prefix.rstrip("/") + "/" if prefix else ""
        return sorted({key[len(base) :].split("/", 1)[0] for key in self.keys(prefix)})

    def sizes(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` and its size (one listing where the backend allows)."""
        return {key: self.size(key) for key in self.keys(prefix)}

    def put_blob(self, key: str, data: bytes) -> bool:
        """Store content-addressed ``data`` unless ``key`` already holds it; True if written.

        A blob's key is its checksum, so an existing key already holds these bytes."""
        if self.exists(key):
            return False
        self.put(key, data)
        return True

    def holds(self, key: str, data: bytes) -> bool:
        """Whether ``key`` holds exactly ``data`` (what ``flor push`` verifies)."""
        try:
            stored = self.get(key)
        except KeyError:
            return False
        return hashlib.sha256(stored).digest() == hashlib.sha256(data).digest()

    def flush(self, progress: Callable[[str], None] | None = None) -> None:
        """Wait until every put is durable where the store keeps it (a no-op when puts are)."""
        return None

    def hold_reserve(self, nbytes: int) -> None:
        """Set ``nbytes`` of local disk aside (a no-op where the store has no disk)."""
        return None

    def release_reserve(self) -> None:
        """Give the reserve back: the disk is full, and a run's last small writes need room."""
        return None
