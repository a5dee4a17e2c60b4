"""Large tensors and byte strings as content-addressed chunks, written where they changed.

A large value is cut into fixed 64 KiB chunks, each stored once under its
SHA-256 (``.blobs/ab/abcd...``). A replay buffer that gained a few rows, an
embedding table with a few rows trained, a growing list pickled: most of their
chunks are the previous checkpoint's, so a checkpoint costs what changed.

A first copy is cut into chunks, each named by its hash: another run may hold
them. The writer hashes them (``name_chunks``), not the training thread, whose
manifest holds placeholders until then. After that, a copy is compared with the
previous copy of the same source (``_flor_prev``; the snapshot's own compare,
``_flor_same``, where it made one):
chunks whose bytes are equal keep its references, and what changed is written,
unhashed piece by piece, into one of the checkpoint's two ``Pack`` blobs: a copy
that changed whole (a parameter, an optimizer's moment, every step) as one piece
of the pack of whole copies, and the chunks that changed of the others as pieces
of the pack of parts. Two files and two store round trips per checkpoint, not
one per tensor or chunk. A copy the snapshot reused (its source's bits were
equal to it, see ``Snapshot.copy``) already carries its references
(``_flor_chunks``).

``held`` is what this run knows the store holds, so that known chunks cost no
store round trip; thinning tells it what it deleted (``forget``).
"""

from __future__ import annotations

import ctypes
import hashlib
import secrets
from typing import Any

import numpy as np
import torch

from flor.runs.layout import blob_key
from flor.store import Store

CHUNK_BYTES = 64 * 1024
PACK_MAX = 16 * 1024 * 1024  # a pack's size, at most


class Pack:
    """Pieces of one checkpoint's copies that changed since their previous copies, stored as
    one blob: the copies that changed whole (a parameter, its gradient, an optimizer's
    moments: every step), or the chunks that changed of those that changed in part (the
    rows a replay buffer gained). One file to create, one hash and one store round trip (an
    S3 request) for each, not one per tensor or chunk. A piece is named by a slice, ``[pack
    sha, offset, bytes, pack bytes]``; until the pack is hashed, its sha is ``name``, a
    random placeholder of the same length, which a manifest pickled before then holds in
    its place (``codec.finish`` swaps them)."""

    def __init__(self) -> None:
        self.name = secrets.token_hex(32)  # 64 hex digits, as a sha's; unguessable
        self.pieces: list[bytes | memoryview] = []
        self.refs: list[list[Any]] = []  # each piece's slice, named when the pack is written
        self.owners: dict[int, tuple[torch.Tensor, list[Any]]] = {}  # by id: each copy once
        self.nbytes = 0

    def add(self, raw: bytes | memoryview) -> list[Any]:
        ref: list[Any] = [self.name, self.nbytes, len(raw), 0]
        self.pieces.append(raw)
        self.refs.append(ref)
        self.nbytes += len(raw)
        return ref

    def seal(self) -> None:
        """No more pieces: each slice names the pack's size (the sha follows, once written)."""
        for ref in self.refs:
            ref[3] = self.nbytes


class Chunks:
    """A run's chunk writer: what it put, and what it knows the store holds."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.held: set[str] = set()

    def forget(self, shas: Any) -> None:
        """Thinning deleted these: a later checkpoint that needs one puts it again."""
        self.held.difference_update(shas)

    def put_tensor(self, t: torch.Tensor, out: Any, pack: bool = False) -> list[Any]:
        """Store the bytes of ``t`` (a flor-owned CPU copy) as chunks, and what changed of it
        since its previous copy as pieces of a pack of ``out`` (with ``pack``; else as chunks,
        or one blob if it changed whole); its references, in order (a chunk's hash, or a slice
        of a pack)."""
        packs: dict[str, Pack] = out.packs
        for open_pack in packs.values():
            if id(t) in open_pack.owners:  # the tree holds it twice; its pack is not written yet
                return open_pack.owners[id(t)][1]
        unnamed: dict[int, tuple[Any, list[str]]] = out.unnamed
        if id(t) in unnamed:  # held twice, and its chunks are named by ``name_chunks``
            return unnamed[id(t)][1]
        known = getattr(t, "_flor_chunks", None)
        if (
            known is not None
            and "_flor_prev" not in vars(t)
            and self._name_stored(known, t.nbytes, out)
        ):
            return list(known)  # stored before (a copy reused, or held twice): no byte read
        mem = memory(t)
        raw = mem.data  # a memoryview of the copy: no bytes copied
        refs = self._references(t, mem, raw)
        if refs is None:  # a first copy, or one whose pack thinning deleted
            return self._unnamed(t, raw, out)
        if None in refs:
            whole = all(r is None for r in refs)
            if pack and (len(raw) <= PACK_MAX or not whole):
                return self._pieces(t, raw, [None] if whole else refs, out)
            if pack:
                return self._unnamed(t, raw, out)
            refs = _named(raw, refs)
        self._put(raw, refs, out)
        t._flor_chunks = refs  # type: ignore[attr-defined]  # all stored: reusable
        return refs

    def _references(self, t: torch.Tensor, mem: np.ndarray, raw: memoryview) -> list[Any] | None:
        """The references of the chunks of ``t`` known so far, ``None`` for each to store;
        None where none is known."""
        refs = getattr(t, "_flor_chunks", None)
        if refs is None:
            refs = _reused(t, mem, raw)
        t.__dict__.pop("_flor_prev", None)
        t.__dict__.pop("_flor_same", None)
        if refs is None or not self._holds(refs):  # a first copy; a pack thinning deleted
            return None
        return list(refs)

    def _name_stored(self, refs: list[Any], nbytes: int, out: Any) -> bool:
        """Name in ``out`` the stored chunks and slices of a copy of ``nbytes``, if the store
        holds them all (else False: ``put_tensor`` stores what it lacks)."""
        held = self.held
        if not all((r[0] if type(r) is list else r) in held for r in refs):
            return False
        step = nbytes if len(refs) == 1 else CHUNK_BYTES
        for i, r in enumerate(refs):
            if type(r) is list:
                out.blobs[r[0]] = r[3]
            else:
                out.blobs[r] = min(step, nbytes - i * step)
        return True

    def _holds(self, refs: list[Any]) -> bool:
        return all(type(r) is not list or r[0] in self.held for r in refs)

    def _pieces(self, t: torch.Tensor, raw: memoryview, refs: list[Any], out: Any) -> list[Any]:
        """What changed of copy ``t`` (``None`` in ``refs``) as pieces of a pack: all of it, one
        piece in the pack of copies that changed whole; or each chunk that changed, in the
        pack of parts. Apart, because a chunk a later checkpoint still points at keeps its
        whole pack: the rows a replay buffer gained would keep every parameter's copy."""
        kind = "whole" if len(refs) == 1 else "part"
        step = len(raw) if len(refs) == 1 else CHUNK_BYTES
        named = []
        for i, ref in enumerate(refs):
            if ref is None:
                piece = raw[i * step : (i + 1) * step]
                if out.packs[kind].nbytes + len(piece) > PACK_MAX:
                    self._write(out, kind)
                ref = out.packs[kind].add(piece)
            named.append(ref)
        out.packs[kind].owners[id(t)] = (t, named)  # stored once that pack is
        return named

    def seal_packs(self, out: Any) -> list[Pack]:
        """The packs of ``out`` with pieces, sealed: what ``write_pack`` writes. They stay in
        ``out`` until then, where ``put_tensor`` finds their owners' references."""
        packs = [pack for pack in out.packs.values() if pack.pieces]
        for pack in packs:
            pack.seal()
        return packs

    def _write(self, out: Any, kind: str) -> None:
        """Write pack ``kind`` of ``out`` (full), and start a new one."""
        pack = out.packs[kind]
        out.packs[kind] = Pack()
        if pack.pieces:
            pack.seal()
            self.write_pack(pack, out)

    def write_pack(self, pack: Pack, out: Any) -> str:
        """Store sealed ``pack`` as one blob and name its pieces; its sha."""
        # One C call joins its pieces (a small tensor's are many): a writer thread looping in
        # Python takes turns at the GIL with the training loop. Hashed without the GIL.
        data = b"".join(pack.pieces)
        sha = hashlib.sha256(data).hexdigest()
        if sha not in out.blobs and sha not in self.held:
            if self.store.put_blob(blob_key(sha), data):
                out.new_blob_bytes += pack.nbytes
                out.created.add(sha)
            self.held.add(sha)
        out.blobs[sha] = pack.nbytes
        for ref in pack.refs:
            ref[0] = sha
        # Its owners' pieces are all named now: a copy is its pack's owner once the last of
        # its pieces went in, and those before went into packs written before.
        for t, refs in pack.owners.values():
            self._put(memory(t).data, refs, out)  # the chunks it kept, in this checkpoint too
            t._flor_chunks = refs  # type: ignore[attr-defined]  # stored: reusable
        return sha

    def put_bytes(self, data: bytes, out: Any) -> list[str]:
        return self._unnamed(data, memoryview(data), out)

    def _unnamed(self, owner: Any, raw: memoryview, out: Any) -> list[str]:
        """References to the chunks of ``raw`` (the bytes of ``owner``: a copy, or a pickle)
        that ``name_chunks`` hashes and stores: the writer's work, not the training thread's
        (a fresh tensor in scope each checkpoint, a batch or the logits, is a first copy).
        Until then each is a random placeholder of a hash's length, which a manifest pickled
        before then holds in its place (``codec.finish`` swaps them)."""
        unnamed: dict[int, tuple[Any, list[str]]] = out.unnamed
        if id(owner) in unnamed:  # held twice
            return unnamed[id(owner)][1]
        names = [secrets.token_hex(32) for _ in range(_count(len(raw)))]
        unnamed[id(owner)] = (owner, names)
        return names

    def name_chunks(self, out: Any) -> list[tuple[str, str]]:
        """Hash and store the chunks ``put_tensor`` and ``put_bytes`` left unnamed; each
        placeholder with its hash. The lists handed out are named in place too."""
        swaps: list[tuple[str, str]] = []
        for owner, names in out.unnamed.values():
            raw = memory(owner).data if isinstance(owner, torch.Tensor) else memoryview(owner)
            shas = _all(raw, len(names))
            self._put(raw, shas, out)
            swaps.extend(zip(names, shas))
            names[:] = shas
            if isinstance(owner, torch.Tensor):
                owner._flor_chunks = list(shas)  # type: ignore[attr-defined]  # stored: reusable
        out.unnamed.clear()
        return swaps

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


def _reused(t: torch.Tensor, mem: np.ndarray, raw: memoryview) -> list[Any] | None:
    """A fresh copy's references where its chunks equal its previous copy's, ``None`` for
    each chunk that changed; None where there is no previous copy to go by (a first copy)."""
    prev: torch.Tensor | None = getattr(t, "_flor_prev", None)
    old = getattr(prev, "_flor_chunks", None)  # None: its write failed or is pending
    if prev is None or old is None:
        return None
    count = _count(len(raw))
    same = getattr(t, "_flor_same", None)  # the snapshot compared them already
    if same is None:
        same = compare(prev, mem)
    if same is None:
        return [None] * count
    if len(old) != count:  # the previous copy was stored whole: a slice of a pack, or a blob
        if type(old[0]) is not list:
            return list(old) if all(same) else [None] * count
        old = _sliced(old[0], count)
    return [old[i] if same[i] else None for i in range(count)]


def _sliced(ref: list[Any], count: int) -> list[list[Any]]:
    """A pack slice of a whole copy, as the slices of its chunks."""
    sha, offset, nbytes, total = ref
    return [
        [sha, offset + i * CHUNK_BYTES, min(CHUNK_BYTES, nbytes - i * CHUNK_BYTES), total]
        for i in range(count)
    ]


def _named(raw: memoryview, refs: list[Any]) -> list[Any]:
    """What changed of a copy (its chunks ``None`` in ``refs``) named by hash: one blob if
    it changed whole."""
    if all(r is None for r in refs):
        return [hashlib.sha256(raw).hexdigest()]
    return [_sha(raw, i) if r is None else r for i, r in enumerate(refs)]


def compare(prev: torch.Tensor, mem: np.ndarray) -> list[bool] | None:
    """Per chunk, whether ``mem`` (a tensor's bytes, ``memory``) kept those of ``prev``, its
    previous copy; None where their sizes differ. A copy stored whole (a parameter, its
    gradient, an optimizer's moment: they change every step) whose first chunk changed
    again has surely changed whole: its other chunks are not compared (a tenth of a DQN
    checkpoint's compares). Were it not, it is stored whole once more: more bytes, never a
    wrong one."""
    before = memory(prev)
    old = getattr(prev, "_flor_chunks", None)  # None: its write failed or is pending
    count = _count(len(mem))
    whole_before = old is not None and len(old) == 1 < count and len(before) == len(mem)
    if whole_before and same_chunks(before[:CHUNK_BYTES], mem[:CHUNK_BYTES]) == [False]:
        return [False] * count
    return same_chunks(before, mem)


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
    may be resized later. Through ctypes, not numpy's array interface: a third of the time,
    and a checkpoint reads a score of them."""
    if t.requires_grad:
        t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    nbytes = t.numel() * t.element_size()
    if not nbytes:
        return np.empty(0, np.uint8)
    buf = (ctypes.c_char * nbytes).from_address(t.data_ptr())
    buf._flor_tensor = t  # type: ignore[attr-defined]  # the array keeps it, and so its memory
    mem: np.ndarray = np.frombuffer(buf, np.uint8)  # type: ignore[call-overload]
    mem.flags.writeable = False
    return mem


def words(raw: np.ndarray) -> np.ndarray:
    """Bytes as 8-byte words where their count allows: an eighth of the compares."""
    return raw.view(np.uint64) if len(raw) % 8 == 0 else raw
