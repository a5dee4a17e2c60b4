"""Where runs live: a tiny ``Store`` ABC and one module per backend.

``open_store`` picks the backend from a URL; a plain path (the default,
``FLOR_HOME`` or ``~/.flor``) is the local directory store.
"""

from __future__ import annotations

import os

from flor.store.base import Store
from flor.store.local import LocalStore

__all__ = ["LocalStore", "Store", "default_home", "open_store"]


def default_home() -> str:
    """``FLOR_HOME`` if set, else ``~/.flor``."""
    return os.environ.get("FLOR_HOME") or os.path.expanduser("~/.flor")


def open_store(url: str | None = None) -> Store:
    """Open the store at ``url`` (a directory path); ``None`` means the default home."""
    return LocalStore(url or default_home())
