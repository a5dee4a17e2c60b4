"""What a recording writes about its run, besides checkpoint data: the run's journal.

Metadata and sources at the start, one commit entry per checkpointed iteration
(written last, after its data: a commit never points at data not yet written),
one entry per finished ``flor.it``
loop, the ``flor.log`` values with each, and the output printed outside loops
at the end. Keys come from ``runs.layout``; the caller decides when (the
background writer calls ``commit`` and ``end_loop``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from dataclasses import replace
from typing import Any

from flor.runs import layout
from flor.runs.records import Commit, LoopEnd, RunMeta
from flor.sources import ProjectFile
from flor.store import Store


class RunJournal:
    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    def start(
        self,
        meta: RunMeta,
        source: str,
        original: str | None,
        project: tuple[ProjectFile, ...] = (),
    ) -> None:
        self.write_meta(meta)
        self.store.put(layout.source_key(self.prefix), source.encode())
        if original is not None:
            self.store.put(layout.original_key(self.prefix), original.encode())
        if project:
            self._write_project(project)

    def _write_project(self, project: tuple[ProjectFile, ...]) -> None:
        """Each file's sources once, by content; then the list that names them."""
        entries, written = [], set()
        for f in project:
            shas = {}
            for part in ("original", "source"):
                data = getattr(f, part).encode()
                sha = hashlib.sha256(data).hexdigest()
                if sha not in written:
                    self.store.put(layout.project_file_key(self.prefix, sha), data)
                    written.add(sha)
                shas[part] = sha
            entries.append({"path": f.path, "module": f.module, **shas})
        layout.put_json(self.store, layout.project_key(self.prefix), {"files": entries})

    def drop_after(self, iteration: int) -> None:
        """Forget what was journaled, logged or checkpointed past ``iteration``, and how the
        loop ended: a resumed recording writes it again from there."""
        for folder in (layout.journal_folder(self.prefix), layout.logs_folder(self.prefix)):
            for key in list(self.store.keys(folder)):
                number = key.rsplit("/", 1)[1].split(".")[0]
                if number.startswith("loop-") or (number.isdigit() and int(number) > iteration):
                    self.store.delete(key)
        for key in list(self.store.keys(layout.ckpt_folder(self.prefix))):
            number = key.rsplit("/", 1)[1].split(".")[0]
            if number.isdigit() and int(number) > iteration:
                self.store.delete(key)

    def adopt(self, commit: Commit) -> None:
        """Begin with another run's checkpoints of ``commit``'s iteration (a fork's start):
        their manifests copied under this run's keys (the tensor blobs they point at are
        the store's, shared), committed without output, which was the other run's."""
        entries = {}
        for label, entry in commit.blocks.items():
            block, _, occurrence = label.rpartition("/")
            key = layout.ckpt_key(self.prefix, commit.iteration, block, int(occurrence))
            self.store.put(key, self.store.get(entry.key))
            entries[label] = replace(
                entry, key=key, new_blob_bytes=0, copied_from=entry.copied_from or entry.key
            )
        self.commit(Commit(commit.iteration, entries), [])

    def previous_length(self, name: str, script: str | None, looked_at: int = 5) -> int:
        """The iterations the newest finished run of ``name`` with the same script recorded,
        among its ``looked_at`` newest runs (0: none)."""
        for run_id in sorted(self.store.children(name), reverse=True)[:looked_at]:
            try:
                meta = RunMeta.from_json(
                    layout.get_json(self.store, layout.meta_key(layout.run_prefix(name, run_id)))
                )
            except (KeyError, ValueError, TypeError):  # gone since listed, or damaged
                continue
            if meta.status == "finished" and meta.script == script and meta.iterations > 0:
                return meta.iterations
        return 0

    def write_meta(self, meta: RunMeta) -> None:
        layout.put_json(self.store, layout.meta_key(self.prefix), meta.to_json())

    def keep_alive(self) -> threading.Event:
        """Rewrite the run's heartbeat until the event returned is set: `flor gc` leaves a
        run alone while it beats."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(layout.HEARTBEAT_SECONDS):
                # a full disk, a server away: gc then goes by the run's start
                with contextlib.suppress(Exception):
                    key = layout.heartbeat_key(self.prefix)
                    layout.put_json(self.store, key, {"time": time.time()})

        threading.Thread(target=beat, name="flor-heartbeat", daemon=True).start()
        return stop

    def commit(self, commit: Commit, logs: list[dict[str, Any]]) -> None:
        """Make an iteration's checkpoints visible to replay (their data is written)."""
        self._write_logs(layout.iteration_logs_key(self.prefix, commit.iteration), logs)
        key = layout.commit_key(self.prefix, commit.iteration)
        layout.put_json(self.store, key, commit.to_json(), compact=True)

    def end_loop(self, end: LoopEnd, logs: list[dict[str, Any]]) -> None:
        self._write_logs(layout.loop_logs_key(self.prefix, end.loop), logs)
        key = layout.loop_end_key(self.prefix, end.loop)
        layout.put_json(self.store, key, end.to_json(), compact=True)

    def finish(self, meta: RunMeta, outside: dict[str, str]) -> None:
        """The output printed outside ``flor.it`` loops, then how the run ended."""
        layout.put_json(self.store, layout.stdout_key(self.prefix), outside)
        self.write_meta(meta)

    def _write_logs(self, key: str, logs: list[dict[str, Any]]) -> None:
        if logs:
            text = "".join(json.dumps(e) + "\n" for e in logs)
            self.store.put(key, text.encode())
