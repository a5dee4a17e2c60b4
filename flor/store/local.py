"""The default store: a directory tree (``FLOR_HOME``, ``~/.flor``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from flor.store.base import Store


class LocalStore(Store):
    """Keys are relative file paths below ``root``; puts are write-temp-then-rename."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()
        self.url = str(self.root)

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"bad store key {key!r}")
        return self.root / key

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise KeyError(key) from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

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
