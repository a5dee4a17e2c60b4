"""Where runs live: a tiny ``Store`` ABC and one module per backend.

``open_store`` picks the backend from a URL. A plain path is the local
directory store (the default: ``FLOR_HOME`` or ``~/.flor``); ``s3://bucket/prefix``
is S3 behind a local write-back cache. ``FLOR_STORE`` (or ``flor --store``)
names the store every command uses.
"""

from __future__ import annotations

import os

from flor.store.base import Store
from flor.store.local import LocalStore

__all__ = ["STORE_ENV", "LocalStore", "Store", "default_home", "default_url", "open_store"]

# Where runs live: a process started for a run (a replay worker) inherits these, and only these.
STORE_ENV = ("FLOR_HOME", "FLOR_STORE", "FLOR_CACHE", "FLOR_UPLOAD_TIMEOUT")


def default_home() -> str:
    """``FLOR_HOME`` if set, else ``~/.flor``: the local store and the home of caches."""
    return os.environ.get("FLOR_HOME") or os.path.expanduser("~/.flor")


def default_url() -> str:
    """``FLOR_STORE`` if set, else the local home."""
    return os.environ.get("FLOR_STORE") or default_home()


def is_s3(url: str) -> bool:
    return url.startswith("s3://")


def open_store(url: str | None = None, cached: bool = True) -> Store:
    """Open the store at ``url`` (default: ``default_url()``).

    An S3 URL opens S3 itself when ``cached`` is false (``flor push``/``pull``),
    else S3 behind the local write-back cache that recording and replay use.
    """
    url = url or default_url()
    if not is_s3(url):
        return LocalStore(url)
    from flor.store.s3 import S3Store

    remote = S3Store(url).check()
    if not cached:
        return remote
    from flor.store.cached import WriteBackStore

    return WriteBackStore(remote, LocalStore(cache_dir(remote.bucket, remote.prefix)))


def cache_dir(bucket: str, prefix: str) -> str:
    """``FLOR_CACHE``, else a folder per bucket and prefix under the local home."""
    root = os.environ.get("FLOR_CACHE") or os.path.join(default_home(), ".cache", "s3")
    return os.path.join(root, bucket, *[p for p in prefix.split("/") if p])
