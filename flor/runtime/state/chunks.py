"""Large tensors and byte strings as content-addressed chunks, written where they changed.

A large value is cut into fixed 64 KiB chunks, each stored once under its
SHA-256 (``.blobs/ab/abcd...``). A replay buffer that gained a few rows, an
embedding table with a few rows trained, a growing list pickled: most of their
chunks are the previous checkpoint's, so a checkpoint costs what changed.

Two shortcuts spare the hashing, both exact:

- a copy the snapshot reused (its source's bits were equal to it, see
  ``Snapshot.copy``) already carries its chunks' hashes (``_flor_chunks``);
- a fresh copy of the same source carries the previous copy (``_flor_prev``):
  chunks whose bytes equal the previous copy's keep its hashes, the rest are
  hashed (one vectorized compare, a tenth of SHA-256's cost).

A copy none of whose chunks equal its previous copy's (a parameter, an optimizer's
moment, every step) is stored as one blob rather than as its chunks: none of them
would be shared, and on a file system each chunk is a file, whose creation costs more
than its bytes. A first copy is always cut into chunks: another run may hold them.

``held`` is what this run knows the store holds, so that known chunks cost no
store round trip; thinning tells it what it deleted (``forget``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from flor.runs.layout import blob_key
from flor.store import Store

CHUNK_BYTES = 64 * 1024
WHOLE_MAX = 16 * 1024 * 1024  # a copy that changed whole, up to this size, is one blob


class Chunks:
    """A run's chunk writer: what it put, and what it knows the store holds."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.held: set[str] = set()

    def forget(self, shas: Any) -> None:
        """Thinning deleted these: a later checkpoint that needs one puts it again."""
        self.held.difference_update(shas)

    def put_tensor(self, t: torch.Tensor, out: Any) -> list[str]:
        """Store the bytes of ``t`` (a flor-owned CPU copy) as chunks; their hashes, in order."""
        flat = _bytes(t)
        raw = flat.numpy().data  # a memoryview of the copy: no bytes copied
        shas = getattr(t, "_flor_chunks", None)
        if shas is None:
            shas = _hashes(t, flat, raw)
        self._put(raw, shas, out)
        t._flor_chunks = shas  # type: ignore[attr-defined]  # all stored: reusable
        t.__dict__.pop("_flor_prev", None)
        return shas

    def put_bytes(self, data: bytes, out: Any) -> list[str]:
        raw = memoryview(data)
        shas = _all(raw, _count(len(raw)))
        self._put(raw, shas, out)
        return shas

    def _put(self, raw: memoryview, shas: list[str], out: Any) -> None:
        step = len(raw) if len(shas) == 1 else CHUNK_BYTES  # one blob, or its chunks
        for i, sha in enumerate(shas):
            piece = raw[i * step : (i + 1) * step]
            if sha not in out.blobs and sha not in self.held:
                if self.store.put_blob(blob_key(sha), bytes(piece)):
                    out.new_blob_bytes += len(piece)
                    out.created.add(sha)
                self.held.add(sha)
            out.blobs[sha] = len(piece)


def _hashes(t: torch.Tensor, flat: torch.Tensor, raw: memoryview) -> list[str]:
    """The chunks' hashes of a fresh copy: the previous copy's where the bytes are equal;
    one hash for the whole copy where none is."""
    prev: torch.Tensor | None = getattr(t, "_flor_prev", None)
    old = getattr(prev, "_flor_chunks", None)  # None: its write failed or is pending
    count = _count(len(raw))
    if prev is None or old is None:
        return _all(raw, count)
    same = _same_chunks(prev, flat)
    if same is None or not any(same):
        return [hashlib.sha256(raw).hexdigest()] if len(raw) <= WHOLE_MAX else _all(raw, count)
    if len(old) != count:  # the previous copy was one blob: reusable only whole
        return list(old) if all(same) else _all(raw, count)
    return [old[i] if same[i] else _sha(raw, i) for i in range(count)]


def _all(raw: memoryview, count: int) -> list[str]:
    return [_sha(raw, i) for i in range(count)]


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a contiguous CPU tensor, as a flat uint8 tensor (no copy)."""
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.reshape(-1).view(torch.uint8)


def _count(n: int) -> int:
    return -(-n // CHUNK_BYTES)


def _sha(raw: memoryview, i: int) -> str:
    return hashlib.sha256(raw[i * CHUNK_BYTES : (i + 1) * CHUNK_BYTES]).hexdigest()


def _same_chunks(prev: torch.Tensor, flat: torch.Tensor) -> list[bool] | None:
    """Per chunk, whether ``prev``'s bytes equal ``flat``'s (None where they cannot compare)."""
    before = _bytes(prev)
    n = flat.numel()
    if before.numel() != n:
        return None
    full = n // CHUNK_BYTES
    same: list[bool] = []
    if full:
        rows = full * CHUNK_BYTES
        a, b = as_words(before[:rows]), as_words(flat[:rows])
        if a.dtype != b.dtype:  # one of them does not align: compare bytes
            a, b = before[:rows], flat[:rows]
        differ = torch.ne(a, b).view(full, -1).any(dim=1)
        same = [not d for d in differ.tolist()]
    if n > full * CHUNK_BYTES:
        same.append(torch.equal(before[full * CHUNK_BYTES :], flat[full * CHUNK_BYTES :]))
    return same


def as_words(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's bytes as the widest integers they align to: equal exactly when
    the bits are (-0.0 is not 0.0, a NaN equals itself), in an eighth of the compares."""
    flat = t.reshape(-1).view(torch.uint8)
    for size, kind in _WORDS:
        if flat.numel() % size == 0:
            try:
                return flat.view(kind)
            except RuntimeError:  # an offset the wider type cannot align to
                continue
    return flat


_WORDS = ((8, torch.int64), (4, torch.int32), (2, torch.int16))
