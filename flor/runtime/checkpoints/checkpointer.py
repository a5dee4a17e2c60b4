"""Taking one block's checkpoint: capture on the training thread, write in the background.

``take`` copies the block's state in memory and hands the write to the
background writer; the returned future resolves to the journal's entry for that
checkpoint (its manifest), which the iteration's commit job reads. A checkpoint
of at most ``PREPARE_HERE`` bytes taken while the writer is idle is also
serialized here (``codec.prepare``: the Python work of comparing copies and
pickling the manifest), so that the writer thread only hashes and writes, which
release the GIL: a writer thread running Python code beside a loop of short
torch calls takes turns at the GIL with it, about 600 waits of the loop for one
small checkpoint. State that cannot be saved raises ``Unrestorable`` naming the
value that holds it.

It keeps each block's last copies of its large tensors and arrays: the next
snapshot of that block reuses a copy whose source did not change, and the
writer stores only the chunks of the others that did (``chunks``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from flor.runs import layout
from flor.runs.records import CheckpointEntry
from flor.runtime.checkpoints.writer import BackgroundWriter
from flor.runtime.state.capture import GlobalRng, Snapshot, Unrestorable, capture
from flor.runtime.state.chunks import Chunks, Pack
from flor.runtime.state.codec import Encoded, encode, finish, prepare
from flor.runtime.state.kinds import stateful_in_scope
from flor.runtime.state.scope import Frame, cheap_values, visible_names
from flor.store import Store

PREPARE_HERE = 16 << 20  # checkpoints this small are serialized on the training thread


@dataclass(frozen=True)
class Written:
    """What a checkpoint write produced: its journal entry, and its bytes."""

    iteration: int
    entry: CheckpointEntry
    logical: int  # what it holds
    stored: int  # what it added to the store, after deduplication
    created: frozenset[str]  # the tensor blobs it added


class Checkpointer:
    def __init__(self, store: Store, prefix: str, writer: BackgroundWriter) -> None:
        self.store = store
        self.prefix = prefix
        self.writer = writer
        self.chunks = Chunks(store)
        self._copies: dict[tuple[str, int], dict[Any, Any]] = {}  # by block: its last copies
        self._nbytes: dict[tuple[str, int], int] = {}  # by block: its last snapshot's bytes
        self._rng = GlobalRng()

    def fits(self, block: tuple[str, int]) -> bool:
        """Whether the writer has room for a snapshot of ``block`` as large as its last."""
        return self.writer.room_for(self._nbytes.get(block, 0))

    def take(
        self,
        g: int,
        block: tuple[str, int],
        objs: tuple[Any, ...],
        named: dict[str, Any],
        frame: Frame,
    ) -> Future[Written]:
        """Capture the state ``SkipBlock.end`` sees at ``frame``; write it in the background."""
        snap = Snapshot(self._copies.get(block, {}), Pack())
        key = layout.ckpt_key(self.prefix, g, *block)
        tree = {
            "key": key,  # which checkpoint this is: a journal entry pointing elsewhere is seen
            "objs": list(_each(snap, {f"value {i + 1}": o for i, o in enumerate(objs)}).values()),
            "named": _each(snap, named),
            "scope": _each(snap, stateful_in_scope(visible_names(frame))),
            "values": _each(snap, cheap_values(frame.f_locals)),
            "rng": self._rng.read(),
        }
        self._copies[block] = copies = snap.current
        self._nbytes[block] = snap.nbytes
        bound = tuple(sorted(k for k in frame.f_locals if not k.startswith("__")))
        encoded: Callable[[], Encoded]
        if self.writer.idle and snap.nbytes <= PREPARE_HERE:
            # Nothing queued before it: no commit's thinning forgets the blobs it reuses.
            try:
                encoded = functools.partial(
                    finish, prepare(tree, self.store, self.chunks, copies.values(), snap.pack)
                )
            except Exception as e:  # a first copy's chunks met a full disk: the writer says
                encoded = functools.partial(_reraise, e)  # so, as for its own failures
        else:
            encoded = functools.partial(
                encode, tree, self.store, self.chunks, copies.values(), snap.pack
            )

        def write() -> Written:
            return self._written(g, key, tree, bound, encoded())

        future: Future[Written] = self.writer.submit(g, write, snap.nbytes)
        return future

    def _written(
        self, g: int, key: str, tree: dict[str, Any], bound: tuple[str, ...], enc: Encoded
    ) -> Written:
        """Store the manifest of ``tree``, whose packs ``enc`` wrote: its journal entry."""
        self.store.put(key, enc.data)
        entry = CheckpointEntry(
            key=key,
            sha256=enc.sha256,
            bytes=len(enc.data),
            blobs=enc.blobs,
            new_blob_bytes=enc.new_blob_bytes,
            objs=len(tree["objs"]),
            holds=tuple(sorted({*tree["named"], *tree["values"]})),
            bound=bound,  # a name outside it was unbound: restoring UNBOUND is right
        )
        return Written(g, entry, enc.logical, enc.stored, frozenset(enc.created))


def _reraise(e: Exception) -> Encoded:
    raise e


def _each(snap: Snapshot, values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for label, value in values.items():
        try:
            out[label] = capture(value, snap)
        except Unrestorable as e:
            raise Unrestorable(f"`{label}` holds {e}") from None
    return out
