"""Checkpoint reads for replay, prefetched in the order the plan will ask for them.

Only large ones are prefetched (``PREFETCH_BYTES``): a small one is read on the
replay's own thread when it is asked for: a thread reading it beside a loop of short
torch calls would cost that loop more in turns at the GIL than the read itself.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from flor.errors import CorruptCheckpoint
from flor.runs.records import CheckpointEntry
from flor.runtime.state.codec import VerifiedBlobs, decode
from flor.store import Store

PREFETCH_BYTES = 16 << 20  # checkpoints larger than this are read ahead, in a thread


class CheckpointLoader:
    def __init__(self, store: Store, expected: list[CheckpointEntry], window: int = 2) -> None:
        self.store = store
        self._order = deque(expected)
        self._window = window
        self._futures: dict[str, Future[Any]] = {}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="flor-prefetch")
        self._verified = VerifiedBlobs()  # what consecutive restores share is read once
        self._fill()

    def _fill(self) -> None:
        while len(self._futures) < self._window and self._order:
            entry = self._order.popleft()
            if entry.logical > PREFETCH_BYTES:
                self._futures[entry.key] = self._pool.submit(self._load, entry)

    def _load(self, entry: CheckpointEntry) -> Any:
        try:
            data = self.store.get(entry.key)
        except KeyError:
            raise CorruptCheckpoint(entry.key, "it is missing from the store") from None
        tree = decode(data, entry.sha256, entry.key, self.store, self._verified)
        own = entry.copied_from or entry.key  # a fork's copy of its parent's holds that key
        held = tree.get("key", own) if isinstance(tree, dict) else own
        if held != own:  # older checkpoints hold no key
            raise CorruptCheckpoint(entry.key, f"its journal entry points at {held}'s bytes")
        return tree

    def get(self, entry: CheckpointEntry) -> Any:
        """The decoded snapshot tree of ``entry``; CorruptCheckpoint if unusable."""
        future = self._futures.pop(entry.key, None)
        self._fill()
        return future.result() if future is not None else self._load(entry)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
