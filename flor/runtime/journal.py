"""What a recording writes about its run, besides checkpoint data: the run's journal.

Metadata and sources at the start, one commit entry per checkpointed iteration
(written last, after its data: semantic 8), one entry per finished ``flor.it``
loop, the ``flor.log`` values with each, and the output printed outside loops
at the end. Keys come from ``runs.layout``; the caller decides when (the
background writer calls ``commit`` and ``end_loop``).
"""

from __future__ import annotations

import json
from typing import Any

from flor.runs import layout
from flor.store import Store


class RunJournal:
    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    def start(self, meta: dict[str, Any], source: str, original: str | None) -> None:
        self.write_meta(meta)
        self.store.put(layout.source_key(self.prefix), source.encode())
        if original is not None:
            self.store.put(layout.original_key(self.prefix), original.encode())

    def write_meta(self, meta: dict[str, Any]) -> None:
        layout.put_json(self.store, layout.meta_key(self.prefix), meta)

    def commit(self, iteration: int, entry: dict[str, Any], logs: list[dict[str, Any]]) -> None:
        """Make iteration ``iteration``'s checkpoints visible to replay (its data is written)."""
        self._write_logs(layout.iteration_logs_key(self.prefix, iteration), logs)
        layout.put_json(self.store, layout.commit_key(self.prefix, iteration), entry)

    def end_loop(self, loop: int, entry: dict[str, Any], logs: list[dict[str, Any]]) -> None:
        self._write_logs(layout.loop_logs_key(self.prefix, loop), logs)
        layout.put_json(self.store, layout.loop_end_key(self.prefix, loop), entry)

    def finish(self, meta: dict[str, Any], outside: dict[str, str]) -> None:
        """The output printed outside ``flor.it`` loops, then how the run ended."""
        layout.put_json(self.store, layout.stdout_key(self.prefix), outside)
        self.write_meta(meta)

    def _write_logs(self, key: str, logs: list[dict[str, Any]]) -> None:
        if logs:
            text = "".join(json.dumps(e) + "\n" for e in logs)
            self.store.put(key, text.encode())
