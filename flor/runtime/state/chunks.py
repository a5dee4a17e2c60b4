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
  hashed (one vectorized compare, a tenth of SHA-256's cost; the snapshot's own,
  ``_flor_same``, where it made one).

A copy none of whose chunks equal its previous copy's (a parameter, an optimizer's
moment, every step) is not cut into chunks, none of which would be shared: the
checkpoint's copies that changed whole are written together as one blob, its
``Pack``: a file and a store round trip per checkpoint, not per tensor. A first copy
is always cut into chunks: another run may hold them.

``held`` is what this run knows the store holds, so that known chunks cost no
store round trip; thinning tells it what it deleted (``forget``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import torch

from flor.runs.layout import blob_key
from flor.store import Store

CHUNK_BYTES = 64 * 1024
PACK_MAX = 16 * 1024 * 1024  # a checkpoint's pack of copies that changed whole, at most


class Pack:
    """The copies of one checkpoint that changed whole since their previous copies (a
    parameter, its gradient, an optimizer's moments: every step), stored as one blob: one
    file to create, one hash and one store round trip (an S3 request) per checkpoint, not
    one per tensor. A copy in it is named by a slice, ``[pack sha, offset, bytes, pack
    bytes]``, filled in once the pack is written."""

    def __init__(self) -> None:
        self.pieces: list[memoryview] = []
        self.copies: dict[int, tuple[torch.Tensor, list[Any]]] = {}  # by id: each copy once
        self.nbytes = 0

    def add(self, t: torch.Tensor, raw: memoryview) -> list[Any]:
        if id(t) in self.copies:
            return self.copies[id(t)][1]
        ref: list[Any] = ["", self.nbytes, len(raw), 0]
        self.pieces.append(raw)
        self.copies[id(t)] = (t, ref)
        self.nbytes += len(raw)
        return ref


class Chunks:
    """A run's chunk writer: what it put, and what it knows the store holds."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.held: set[str] = set()

    def forget(self, shas: Any) -> None:
        """Thinning deleted these: a later checkpoint that needs one puts it again."""
        self.held.difference_update(shas)

    def put_tensor(self, t: torch.Tensor, out: Any, pack: bool = False) -> list[Any]:
        """Store the bytes of ``t`` (a flor-owned CPU copy) as chunks, or, with ``pack``, as a
        piece of ``out.pack`` if it changed whole (else as one blob); their references, in
        order (a chunk's hash, or a slice of a pack)."""
        mem = memory(t)
        raw = mem.data  # a memoryview of the copy: no bytes copied
        if id(t) in out.pack.copies:  # the tree holds it twice
            return [out.pack.add(t, raw)]
        refs = getattr(t, "_flor_chunks", None)
        if refs is None:
            refs = _hashes(t, mem, raw)
        t.__dict__.pop("_flor_prev", None)
        t.__dict__.pop("_flor_same", None)
        if refs is not None and type(refs[0]) is list and refs[0][0] not in self.held:
            refs = _all(raw, _count(len(raw)))  # its pack was thinned away: stored again
        if refs is None and not pack:  # changed whole: one blob
            refs = [hashlib.sha256(raw).hexdigest()]
        if refs is None:  # changed whole: a piece of this checkpoint's pack
            if out.pack.nbytes + len(raw) > PACK_MAX:
                self.put_pack(out)
            return [out.pack.add(t, raw)]
        self._put(raw, refs, out)
        t._flor_chunks = refs  # type: ignore[attr-defined]  # all stored: reusable
        return refs

    def put_pack(self, out: Any) -> None:
        """Write ``out.pack`` as one blob, name its pieces, and start a new one."""
        pack, out.pack = out.pack, Pack()
        if not pack.pieces:
            return
        digest = hashlib.sha256()
        for piece in pack.pieces:
            digest.update(piece)
        sha = digest.hexdigest()
        if sha not in out.blobs and sha not in self.held:
            if self.store.put_blob(blob_key(sha), b"".join(pack.pieces)):
                out.new_blob_bytes += pack.nbytes
                out.created.add(sha)
            self.held.add(sha)
        out.blobs[sha] = pack.nbytes
        for t, ref in pack.copies.values():
            ref[0], ref[3] = sha, pack.nbytes
            t._flor_chunks = [ref]  # stored: reusable

    def put_bytes(self, data: bytes, out: Any) -> list[str]:
        raw = memoryview(data)
        shas = _all(raw, _count(len(raw)))
        self._put(raw, shas, out)
        return shas

    def _put(self, raw: memoryview, refs: list[Any], out: Any) -> None:
        step = len(raw) if len(refs) == 1 else CHUNK_BYTES  # one blob, or its chunks
        for i, sha in enumerate(refs):
            if type(sha) is list:  # a slice of a pack this run wrote, which the store holds
                out.blobs[sha[0]] = sha[3]
                continue
            piece = raw[i * step : (i + 1) * step]
            if sha not in out.blobs and sha not in self.held:
                if self.store.put_blob(blob_key(sha), bytes(piece)):
                    out.new_blob_bytes += len(piece)
                    out.created.add(sha)
                self.held.add(sha)
            out.blobs[sha] = len(piece)


def _hashes(t: torch.Tensor, mem: np.ndarray, raw: memoryview) -> list[Any] | None:
    """The chunks' references of a fresh copy: the previous copy's where the bytes are
    equal; None where none is (the copy goes into the checkpoint's pack whole)."""
    prev: torch.Tensor | None = getattr(t, "_flor_prev", None)
    old = getattr(prev, "_flor_chunks", None)  # None: its write failed or is pending
    count = _count(len(raw))
    if prev is None or old is None:
        return _all(raw, count)
    same = getattr(t, "_flor_same", None)  # the snapshot compared them already
    if same is None:
        same = _compared(memory(prev), mem, whole_before=len(old) == 1 < count)
    if same is None or not any(same):
        return None if len(raw) <= PACK_MAX else _all(raw, count)
    if len(old) != count:  # the previous copy was one blob: reusable only whole
        return list(old) if all(same) else _all(raw, count)
    return [old[i] if same[i] else _sha(raw, i) for i in range(count)]


def _compared(prev: np.ndarray, mem: np.ndarray, whole_before: bool) -> list[bool] | None:
    """Per chunk, whether the copy kept ``prev``'s bytes. A tensor that changed whole last
    time (a parameter, an optimizer's moment) and whose first chunk changed again has
    surely changed whole: its other chunks are not compared (a tenth of a DQN checkpoint's
    compares). Were it not, it is stored whole once more: more bytes, never a wrong one."""
    first = slice(0, CHUNK_BYTES)
    if whole_before and same_chunks(prev[first], mem[first]) == [False]:
        return None
    return same_chunks(prev, mem)


def _all(raw: memoryview, count: int) -> list[str]:
    return [_sha(raw, i) for i in range(count)]


def _count(n: int) -> int:
    return -(-n // CHUNK_BYTES)


def _sha(raw: memoryview, i: int) -> str:
    return hashlib.sha256(raw[i * CHUNK_BYTES : (i + 1) * CHUNK_BYTES]).hexdigest()


def same_chunks(before: np.ndarray, after: np.ndarray) -> list[bool] | None:
    """Per 64 KiB chunk, whether two byte arrays (``memory``) are equal (None where their
    sizes differ): equal exactly when the bits are (-0.0 is not 0.0, a NaN equals itself).
    In numpy, a quarter of torch's time."""
    n = len(after)
    if len(before) != n:
        return None
    full = n // CHUNK_BYTES
    rows = full * CHUNK_BYTES
    same: list[bool] = []
    if full:
        differ = (words(before[:rows]) != words(after[:rows])).reshape(full, -1).any(axis=1)
        same = (~differ).tolist()
    if n > rows:
        same.append(bool((before[rows:] == after[rows:]).all()))
    return same


def memory(t: torch.Tensor) -> np.ndarray:
    """A CPU tensor's bytes, read-only, without a copy where it is contiguous. Not through
    ``Tensor.numpy()``: that marks the storage as not resizable, and the script's own tensor
    may be resized later."""
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    nbytes = t.numel() * t.element_size()
    if not nbytes:
        return np.empty(0, np.uint8)
    return np.asarray(_ArrayView(t, nbytes))


class _ArrayView:
    """numpy's array interface over a tensor's memory; the array keeps it, and so the tensor."""

    def __init__(self, t: torch.Tensor, nbytes: int) -> None:
        self.tensor = t
        self.__array_interface__ = {
            "data": (t.data_ptr(), True),
            "shape": (nbytes,),
            "typestr": "|u1",
            "version": 3,
        }


def words(raw: np.ndarray) -> np.ndarray:
    """Bytes as 8-byte words where their count allows: an eighth of the compares."""
    return raw.view(np.uint64) if len(raw) % 8 == 0 else raw
