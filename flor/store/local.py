"""The default store: a directory tree (``FLOR_HOME``, ``~/.flor``).

Durability costs one sync per commit, not one per file: data keys (chunks,
manifests: what a later commit points at) are written without an fsync, and
the next put of any other key (a commit) first makes them all durable, with
one ``syncfs`` where Linux has it. A crash then never leaves a commit
pointing at data the disk lost.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from flor.errors import FlorError
from flor.store.base import KeyKinds, Store

_NO_KINDS = KeyKinds()


class LocalStore(Store):
    """Keys are relative file paths below ``root``; puts are write-temp-then-rename."""

    def __init__(self, root: str | os.PathLike[str], kinds: KeyKinds = _NO_KINDS) -> None:
        self.root = Path(root).expanduser()
        self.url = str(self.root)
        self.kinds = kinds
        self._unsynced: list[str] = []  # data written since the last sync
        self._lock = threading.Lock()
        self._temporaries = itertools.count()  # with the pid and id: names no other put uses

    def check(self) -> LocalStore:
        """Fail now, in one line, if the folder cannot be made or written to (a recording
        is about to write there)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not os.access(self.root, os.W_OK):
                raise PermissionError(errno.EACCES, "permission denied")
        except OSError as e:
            why = e.strerror or e
            raise FlorError("store-unwritable", f"cannot write to {self.root}: {why}") from None
        return self

    def _path(self, key: str) -> Path:
        return Path(self._file(key))

    def _file(self, key: str) -> str:
        """``key``'s file, as a string: a checkpoint puts and looks up dozens of chunks, and
        pathlib's joins cost more than the lookup."""
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"bad store key {key!r}")
        return f"{self.url}/{key}"

    def put(self, key: str, data: bytes) -> None:
        deferred = self.kinds.data(key)
        if not deferred:
            self.flush()  # what this key may point at is durable before it is
        path = self._file(key)
        folder = os.path.dirname(path)
        tmp = f"{folder}/.tmp-{os.getpid()}-{id(self):x}-{next(self._temporaries)}"
        # Plain os calls: a checkpoint puts dozens of chunks, and mkstemp's and pathlib's
        # Python-level work cost more than the write itself.
        try:
            fd = os.open(tmp, _CREATE, 0o666)
        except FileNotFoundError:  # the key's folder is new
            os.makedirs(folder, exist_ok=True)
            fd = os.open(tmp, _CREATE, 0o666)
        try:
            try:
                _write_all(fd, data)
                if not deferred:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if deferred:
            with self._lock:
                self._unsynced.append(path)

    def flush(self, progress: Callable[[str], None] | None = None) -> None:
        """Make every deferred put durable: one ``syncfs``, else an fsync per file."""
        with self._lock:
            pending, self._unsynced = self._unsynced, []
        if pending and not _syncfs(self.root):
            for path in pending:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:  # deleted since (thinned): nothing to keep
                    continue
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def hold_reserve(self, nbytes: int) -> None:
        """A file of ``nbytes`` that a full disk frees for the journal's last entries (named
        like a temporary: no listing shows it); reserves of dead processes go first."""
        for stale in self.root.glob(".tmp-reserve-*"):
            if not _alive(int(stale.name.rsplit("-", 1)[1])):
                stale.unlink(missing_ok=True)
        path = self.root / f".tmp-reserve-{os.getpid()}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                if hasattr(os, "posix_fallocate"):
                    os.posix_fallocate(f.fileno(), 0, nbytes)
                else:  # blocks a sparse file would not hold
                    f.write(bytes(nbytes))
        except OSError:  # already short of room: nothing to set aside
            path.unlink(missing_ok=True)

    def release_reserve(self) -> None:
        (self.root / f".tmp-reserve-{os.getpid()}").unlink(missing_ok=True)

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise KeyError(key) from None

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._file(key))

    def keys(self, prefix: str) -> Iterator[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return
        found = []
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                if not name.startswith(".tmp-"):
                    found.append(Path(dirpath, name).relative_to(self.root).as_posix())
        yield from sorted(found)

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        for folder in path.parents:  # drop folders the delete emptied, up to the root
            if folder == self.root or not folder.is_relative_to(self.root):
                break
            try:
                folder.rmdir()
            except OSError:
                break

    def size(self, key: str) -> int:
        return self._path(key).stat().st_size


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _syncfs(folder: Path) -> bool:
    """Flush the whole file system holding ``folder`` in one call (Linux); False if unable."""
    sync = getattr(_LIBC, "syncfs", None)
    if sync is None:
        return False
    fd = os.open(folder, os.O_RDONLY)
    try:
        return bool(sync(fd) == 0)
    finally:
        os.close(fd)


try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # no C library to load (Windows): fsync per file
    _LIBC = None
