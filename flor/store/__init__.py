"""Where runs live: a tiny ``Store`` ABC and one module per backend.

``open_store`` picks the backend from a URL. A plain path is the local
directory store (the default: ``FLOR_HOME`` or ``~/.flor``); ``s3://bucket/prefix``
is S3 behind a local write-back cache. ``StoreSettings.from_env`` is the one
reader of the store's variables (``FLOR_HOME``, ``FLOR_STORE``, ``FLOR_CACHE``,
``FLOR_UPLOAD_TIMEOUT``); the edges (the ``flor`` command, ``import flor``)
call it and pass the settings down.

Imports: flor.errors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flor.store.base import KeyKinds, Store
from flor.store.local import LocalStore

__all__ = ["STORE_ENV", "KeyKinds", "LocalStore", "Store", "StoreSettings", "open_store"]

# Where runs live: what a process started for a run on another machine (a Ray task) needs.
STORE_ENV = ("FLOR_HOME", "FLOR_STORE", "FLOR_CACHE", "FLOR_UPLOAD_TIMEOUT")
NO_KINDS = KeyKinds()  # assume nothing of keys: always correct, never fast
DEFAULT_UPLOAD_TIMEOUT = 600.0  # seconds the end of a run keeps retrying an unreachable server


@dataclass(frozen=True)
class StoreSettings:
    home: str  # the local store, and the home of caches
    url: str | None = None  # where runs live, when not ``home``
    cache: str | None = None  # the S3 write-back cache (default: under ``home``)
    upload_timeout: float = DEFAULT_UPLOAD_TIMEOUT

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StoreSettings:
        from flor.errors import FlorError

        timeout = environ.get("FLOR_UPLOAD_TIMEOUT") or str(DEFAULT_UPLOAD_TIMEOUT)
        try:
            seconds = float(timeout)
        except ValueError:
            raise FlorError(
                "bad-env", f"FLOR_UPLOAD_TIMEOUT={timeout!r} is not a number of seconds"
            ) from None
        return cls(
            home=environ.get("FLOR_HOME") or os.path.expanduser("~/.flor"),
            url=environ.get("FLOR_STORE") or None,
            cache=environ.get("FLOR_CACHE") or None,
            upload_timeout=seconds,
        )

    @property
    def default_url(self) -> str:
        return self.url or self.home


def is_s3(url: str) -> bool:
    return url.startswith("s3://")


def shared_url(url: str) -> str:
    """``url`` as another process opens it (a replay worker, a spawned rank), from another
    working directory: a local folder's path made absolute."""
    return url if is_s3(url) else os.path.abspath(url)


def open_store(
    url: str | None,
    settings: StoreSettings,
    cached: bool = True,
    kinds: KeyKinds = NO_KINDS,
    warn: Callable[[str], None] | None = None,
    spool: bool = False,
) -> Store:
    """Open the store at ``url`` (default: the settings' URL, else their home).

    An S3 URL opens S3 itself when ``cached`` is false (``flor push``/``pull``),
    else S3 behind the local write-back cache that recording and replay use;
    ``kinds`` says which keys that cache may serve and upload ahead of commits,
    and ``warn`` hears of an unreachable server. With ``spool`` (a recording), a
    server that does not answer yet is not an error: the run spools to the cache
    and uploads once it answers. A store that answers no (no such bucket, refused
    credentials) and one that cannot be asked (no credentials, no bucket named)
    fail at once either way, and so does, for a recording, a local folder that cannot be
    written.
    """
    url = url or settings.default_url
    if not is_s3(url):
        return LocalStore(url, kinds).check() if spool else LocalStore(url, kinds)
    from flor.errors import StoreUnreachable
    from flor.store.s3 import S3Store

    remote = S3Store(url)
    down: StoreUnreachable | None = None
    try:
        remote.check()
    except StoreUnreachable as e:
        if not (cached and spool):
            raise
        down = e
    if not cached:
        return remote
    from flor.store.cached import WriteBackStore

    cache = LocalStore(cache_dir(settings, remote.bucket, remote.prefix), kinds)
    if spool:
        cache.check()  # what a recording writes first
    if down is not None and warn is not None:
        warn(
            f"{down}; recording to {cache.root} and uploading when it answers "
            "(`flor push` finishes what the run cannot)"
        )
    return WriteBackStore(remote, cache, kinds, settings.upload_timeout, warn, down is not None)


def cache_dir(settings: StoreSettings, bucket: str, prefix: str) -> str:
    """``FLOR_CACHE``, else a folder per bucket and prefix under the local home."""
    root = settings.cache or os.path.join(settings.home, ".cache", "s3")
    return os.path.join(root, bucket, *[p for p in prefix.split("/") if p])
