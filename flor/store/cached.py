"""S3 behind a local write-back cache: what ``FLOR_STORE=s3://...`` records to and replays from.

A put lands in the local cache (fast, atomic) and is queued for upload, so
training never waits on the network; ``flush`` (at the end of a run) waits for
the uploads, with progress on stderr. Uploads keep the order of the puts at
every commit: checkpoint data may upload in parallel, but a journal entry or
``run.json`` uploads only after everything put before it, so S3 never holds a
commit whose data is missing. While the server is down, uploads
retry; nothing in the cache is ever deleted by a failure.

Reads of immutable keys (content-addressed blobs, checkpoint manifests, the
recorded source) go through the cache and fetch lazily; everything else is
read from S3, which is the truth.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait

from flor.errors import FlorError, StoreUnreachable
from flor.store.base import KeyKinds, Store
from flor.store.local import LocalStore
from flor.store.s3 import S3Store

Warn = Callable[[str], None]


class WriteBackStore(Store):
    def __init__(
        self,
        remote: S3Store,
        cache: LocalStore,
        kinds: KeyKinds,
        upload_timeout: float,
        warn: Warn | None = None,
        down_said: bool = False,
    ) -> None:
        self.remote = remote
        self.down_said = down_said  # the user was told at start that the server is down
        self.cache = cache
        self.kinds = kinds
        self.upload_timeout = upload_timeout
        self.warn = warn
        self.url = remote.url
        self._uploader: Uploader | None = None
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes) -> None:
        self.cache.put(key, data)
        self._upload(key, blob=False)

    def put_blob(self, key: str, data: bytes) -> bool:
        written = self.cache.put_blob(key, data)
        self._upload(key, blob=True)  # cached is not uploaded: the uploader checks S3
        return written

    def get(self, key: str) -> bytes:
        if self._pending(key):
            return self.cache.get(key)
        if not self.kinds.immutable(key):
            return self.remote.get(key)
        try:
            return self.cache.get(key)
        except KeyError:
            data = self.remote.get(key)  # lazily, only what replay asks for
            if not self.kinds.content_addressed(key) or key.endswith(
                hashlib.sha256(data).hexdigest()
            ):
                self.cache.put(key, data)  # a corrupt blob is not kept: the reader reports it
            return data

    def exists(self, key: str) -> bool:
        if self._pending(key) or (self.kinds.immutable(key) and self.cache.exists(key)):
            return True
        return self.remote.exists(key)

    def keys(self, prefix: str) -> Iterator[str]:
        """What S3 holds, and what this process put that is still on its way there."""
        pending = self._pending_under(prefix)  # first: a key that settles after it is listed
        yield from sorted(set(self.remote.keys(prefix)) | pending)

    def children(self, prefix: str) -> list[str]:
        if self._uploader is None or not self._uploader.pending():
            return self.remote.children(prefix)  # one delimited listing, not every key
        return super().children(prefix)

    def delete(self, key: str) -> None:
        self.remote.delete(key)
        self.cache.delete(key)

    def sizes(self, prefix: str) -> dict[str, int]:
        local = {k: self.cache.size(k) for k in self._pending_under(prefix)}
        return {**self.remote.sizes(prefix), **local}

    def size(self, key: str) -> int:
        return self.cache.size(key) if self._pending(key) else self.remote.size(key)

    def holds(self, key: str, data: bytes) -> bool:
        return self.remote.holds(key, data)

    def hold_reserve(self, nbytes: int) -> None:
        self.cache.hold_reserve(nbytes)  # the spool is what fills a disk

    def release_reserve(self) -> None:
        self.cache.release_reserve()

    def flush(self, progress: Callable[[str], None] | None = None) -> None:
        if self._uploader is not None:
            self._uploader.flush(progress, self.upload_timeout)

    def _pending_under(self, prefix: str) -> set[str]:
        folder = prefix.rstrip("/") + "/" if prefix else ""
        pending = self._uploader.pending() if self._uploader else set()
        return {k for k in pending if k.startswith(folder)}

    def _pending(self, key: str) -> bool:
        return self._uploader is not None and self._uploader.is_pending(key)

    def _upload(self, key: str, blob: bool) -> None:
        with self._lock:
            if self._uploader is None:
                quiet = self.down_said or self.warn is None
                self._uploader = Uploader(
                    self.remote, self.cache, self.kinds.data, None if quiet else self.warn
                )
        self._uploader.submit(key, blob)


class Uploader:
    """One dispatcher thread in put order; data uploads fan out to a small pool."""

    def __init__(
        self,
        remote: S3Store,
        cache: LocalStore,
        is_data: Callable[[str], bool],
        warn: Warn | None,
        workers: int = 8,
    ) -> None:
        self.remote = remote
        self.cache = cache
        self.is_data = is_data
        self.warn = warn
        self._queue: list[tuple[str, bool]] = []
        self._cond = threading.Condition()
        self._pending: dict[str, int] = {}  # submitted, not yet uploaded: key -> times
        self._pending_bytes = 0
        self._deadline: float | None = None  # set by flush: stop retrying after it
        self._confirmed: set[str] = set()  # blobs known to be in S3
        self.failed: list[str] = []
        self._broken = False  # some upload gave up: no later commit may go up
        self.error: FlorError | None = None
        self._warned = False
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="flor-upload")
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="flor-uploader", daemon=True
        )
        self._dispatcher.start()

    def submit(self, key: str, blob: bool) -> None:
        with self._cond:
            self._queue.append((key, blob))
            self._pending[key] = self._pending.get(key, 0) + 1
            self._pending_bytes += self._size(key)
            self._cond.notify_all()

    def pending(self) -> set[str]:
        """Keys put but not yet in S3."""
        with self._cond:
            return set(self._pending)

    def is_pending(self, key: str) -> bool:
        with self._cond:
            return key in self._pending

    def flush(self, progress: Callable[[str], None] | None, timeout: float) -> None:
        """Wait until every submitted key is uploaded; raise a one-line error if some never were."""
        self._deadline = time.monotonic() + timeout
        last = time.monotonic() - 1.5  # quiet unless it takes more than half a second
        with self._cond:
            while self._pending:
                if progress and time.monotonic() - last > 2:
                    progress(
                        f"uploading to {self.remote.url}: {len(self._pending)} objects "
                        f"({self._pending_bytes / 1e6:.1f} MB) left"
                    )
                    last = time.monotonic()
                if not self._dispatcher.is_alive():  # it died: nothing will settle the rest
                    self.failed += list(self._pending)
                    self._pending.clear()
                    break
                self._cond.wait(0.2)
            failed, self.failed = self.failed, []
            error, self.error = self.error, None
        if failed:
            why = error.message if error else "upload failed"
            names = sorted({k.split("/")[0] for k in failed if not k.startswith(".")}) or ["NAME"]
            raise FlorError(
                "upload-incomplete",
                f"{len(failed)} objects did not reach {self.remote.url} ({why}); they are kept "
                f"in {self.cache.root}, and `FLOR_HOME={self.cache.root} flor push "
                f"{' '.join(names)} --to {self.remote.url}` finishes the upload",
            )

    def _size(self, key: str) -> int:
        try:
            return self.cache.size(key)
        except OSError:
            return 0

    def _dispatch(self) -> None:
        inflight: list[Future[None]] = []
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                key, blob = self._queue.pop(0)
            if self.is_data(key):
                try:
                    future = self._pool.submit(self._upload, key, blob)
                except RuntimeError:  # the interpreter is exiting (a legacy --flor run's end)
                    self._settle(key, self._try(key, blob))  # its pool takes no more: here
                    continue
                future.add_done_callback(functools.partial(self._settled, key))
                inflight.append(future)
                continue
            wait(inflight)  # a commit goes up only after all data put before it
            broken = self._broken or any(f.exception() is not None for f in inflight)
            inflight.clear()
            self._settle(
                key, FlorError("skipped", "its data failed") if broken else self._try(key, blob)
            )

    def _try(self, key: str, blob: bool) -> BaseException | None:
        try:
            self._upload(key, blob)
        except Exception as e:
            return e
        return None

    def _settled(self, key: str, future: Future[None]) -> None:
        self._settle(key, future.exception())

    def _settle(self, key: str, error: BaseException | None) -> None:
        with self._cond:
            if error is not None:
                self._broken = True
                self.failed.append(key)
                if isinstance(error, FlorError) and error.slug != "skipped":
                    self.error = self.error or error
            self._pending[key] -= 1
            if not self._pending[key]:
                del self._pending[key]
            self._pending_bytes -= self._size(key)
            self._cond.notify_all()

    def _upload(self, key: str, blob: bool) -> None:
        delay = 0.5
        while True:
            try:
                if blob and (key in self._confirmed or self.remote.exists(key)):
                    self._confirmed.add(key)  # stored once in S3, whoever uploaded it
                    return
                try:
                    data = self.cache.get(key)
                except KeyError:
                    return  # deleted since it was put: nothing to upload
                self.remote.put(key, data)
                if blob:
                    self._confirmed.add(key)
                return
            except StoreUnreachable as e:
                if self._deadline is not None and time.monotonic() > self._deadline:
                    raise
                if not self._warned and self.warn is not None:
                    self._warned = True
                    self.warn(f"{e}; uploads will retry (the data is safe in {self.cache.root})")
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
