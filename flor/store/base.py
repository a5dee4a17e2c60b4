"""The storage contract: immutable bytes under string keys.

Keys are ``/``-separated paths relative to the store's root. Writers put data
first and the small journal object that points at it last, so a reader that
lists keys never sees a half-written checkpoint (ARCHITECTURE.md, semantic 8).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator


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
