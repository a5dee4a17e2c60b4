"""Checkpoint bytes: a small manifest plus content-addressed chunks.

A checkpoint is a pickle of plain values (its manifest) in which every large
tensor and every large byte string (a pickled object) is replaced by the list
of its 64 KiB chunks' SHA-256 (``chunks``): each chunk is stored once for the
whole store (``.blobs/ab/abcd...``). A tensor that did not change since the
last checkpoint, the rows of a replay buffer that did not, a frozen backbone
another run already stored: none of them cost bytes again. What changed since
the previous checkpoint (a tensor whole, or some of its chunks) is a slice of
one of the checkpoint's packs, ``[sha, offset, bytes, pack bytes]``. A recording's
small tensors are pieces of its pack of whole copies too (``packed_copy``); elsewhere
they stay inline, where a blob per bias vector would cost more than it saves.

Loading uses an unpickler that resolves no class but ``dict``, ``bytes`` and
``complex``, and checks every byte: the manifest against the SHA-256 in its
journal entry, each chunk and pack against its key.
Opaque leaves (a user's plain object) travel as pickled bytes and are
unpickled only after their manifest matched, by ``unpickle``'s loader, which
resolves no function that could act on the machine.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import math
import pickle
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

from flor.errors import CorruptCheckpoint
from flor.runs.layout import blob_key
from flor.runtime.state import unpickle
from flor.runtime.state.chunks import PACK_MAX, Chunks, Pack
from flor.store import Store

BLOB_MIN_BYTES = 64 * 1024


@dataclass
class Encoded:
    data: bytes  # the manifest
    sha256: str
    blobs: dict[str, int] = field(default_factory=dict)  # blob sha256 -> bytes
    new_blob_bytes: int = 0  # blob bytes the store did not hold yet
    created: set[str] = field(default_factory=set)  # the blobs this write put in the store
    # what changed of the copies, written before the manifest: whole copies, and parts
    packs: dict[str, Pack] = field(default_factory=lambda: {"whole": Pack(), "part": Pack()})
    # by id: values whose chunks ``finish`` names (first copies, pickles), with placeholders
    unnamed: dict[int, tuple[Any, list[str]]] = field(default_factory=dict)

    @property
    def logical(self) -> int:
        """What the checkpoint would take without deduplication."""
        return len(self.data) + sum(self.blobs.values())

    @property
    def stored(self) -> int:
        """What it added to the store."""
        return len(self.data) + self.new_blob_bytes


# A manifest of plain Python values (tensors as raw bytes), pickled: a C pickler writes it and
# an unpickler that resolves no class reads it, both several times faster than torch.save and
# weights-only torch.load, whose per-object Python callbacks dominated a checkpoint's fixed
# cost. Trees it cannot hold (a sparse tensor) and older manifests use torch.save's format.
MANIFEST = b"FLOR-MANIFEST-1\n"


class LargeBytes(bytes):
    """A pickled value of at least ``BLOB_MIN_BYTES`` (``capture`` marks them): stored as
    chunks, like a tensor (a growing list another checkpoint holds most of)."""


class _NotPlain(Exception):
    pass


def encode(
    tree: Any,
    store: Store | None = None,
    chunks: Chunks | None = None,
    copies: Iterable[torch.Tensor] = (),
    pack: Pack | None = None,
) -> Encoded:
    """Serialize ``tree``; with a ``store``, put its large values there as chunks
    (through ``chunks``, which knows what this run already stored). ``copies``: the
    snapshot's large copies, stored first, so that what changed of them goes into packs
    whose names the manifest can refer to; ``pack``: its small ones (``prepare``)."""
    return finish(prepare(tree, store, chunks, copies, pack))


@dataclass
class Prepared:
    """A checkpoint serialized but for its packs (``prepare``): ``finish`` hashes and writes
    them, and names them in the manifest."""

    out: Encoded  # its manifest's data names each pack by its placeholder
    packs: list[Pack]
    chunks: Chunks | None
    tree: Any = None  # a tree only torch.save holds: saved once its packs are named


def prepare(
    tree: Any,
    store: Store | None = None,
    chunks: Chunks | None = None,
    copies: Iterable[torch.Tensor] = (),
    pack: Pack | None = None,
) -> Prepared:
    """What ``encode`` does that runs Python code per value: the copies compared and cut
    into packs, and the manifest pickled (each pack named by its placeholder). A training
    thread does this part; ``finish``, hashing and writing (without the GIL, mostly), can
    run beside it on another thread without making it wait. ``pack``: the pieces the
    snapshot put in its pack of whole copies already (``packed_copy``)."""
    if chunks is None and store is not None:
        chunks = Chunks(store)
    out = Encoded(b"", "")
    if pack is not None:
        assert chunks is not None, "a snapshot's pack is written with its chunks"
        out.packs["whole"] = pack
    packs: list[Pack] = []
    if chunks is not None:
        for t in copies:
            chunks.put_tensor(t, out, pack=True)
        packs = chunks.seal_packs(out)
    try:
        buf = io.BytesIO()
        buf.write(MANIFEST)
        _Manifest(buf, chunks, out).dump(tree)
        out.data = buf.getvalue()
    except _NotPlain:
        return Prepared(out, packs, chunks, _split(tree, chunks, out))
    return Prepared(out, packs, chunks)


def finish(prepared: Prepared) -> Encoded:
    """Write the packs of a ``prepare``d checkpoint, and name them in its manifest."""
    out, chunks = prepared.out, prepared.chunks
    data = out.data
    for name, sha in chunks.name_chunks(out) if chunks is not None else ():
        data = data.replace(name.encode(), sha.encode())  # same length, as for packs
    for pack in prepared.packs:
        assert chunks is not None  # packs come from chunks
        sha = chunks.write_pack(pack, out)
        # Same length (64 hex digits), so the pickle stays valid; the placeholder is random,
        # 256 bits: nothing else in the manifest holds it.
        data = data.replace(pack.name.encode(), sha.encode())
    if prepared.tree is not None:  # its slices were named in place as the packs were written
        buf = io.BytesIO()
        torch.save(prepared.tree, buf)
        data = buf.getvalue()
    out.data = data
    out.sha256 = hashlib.sha256(data).hexdigest()
    return out


def decode(
    data: bytes,
    sha256: str,
    key: str,
    store: Store | None = None,
    verified: VerifiedBlobs | None = None,
) -> Any:
    """Verify ``data`` against ``sha256``, then load it (and its blobs) without running code;
    ``verified``: blobs an earlier decode read and checked already."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CorruptCheckpoint(key, "checksum mismatch (the file was changed or truncated)")
    try:
        if data.startswith(MANIFEST):
            tree = _NoClasses(io.BytesIO(memoryview(data)[len(MANIFEST) :])).load()
        else:
            tree = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:
        raise CorruptCheckpoint(key, f"not a flor checkpoint ({type(e).__name__})") from None
    tree = _join(tree, _Blobs(store, key, verified))
    unpickle.preload(tree, key)
    return tree


class _Manifest(pickle.Pickler):
    """Pickles a captured tree as plain values. The C pickler writes dicts, lists, tuples,
    strings and numbers itself and asks ``reducer_override`` only of the rest: a tensor, an
    OrderedDict (a state_dict), a dtype are written as the tagged dicts ``_join`` reads,
    each as ``dict(...)`` of them; anything else is not plain (``torch.save`` then)."""

    def __init__(self, file: io.BytesIO, chunks: Chunks | None, out: Encoded) -> None:
        super().__init__(file, protocol=5)
        self._chunks = chunks
        self._out = out

    def reducer_override(self, x: Any) -> Any:
        if type(x) is complex or x is dict or x is bytes:
            return NotImplemented  # builtins.complex, and the classes reductions name
        if type(x) is LargeBytes and self._chunks is None:
            return (bytes, (bytes(x),))  # nowhere to put its chunks: inline
        return (dict, (_tagged(x, self._chunks, self._out),))


def _tagged(x: Any, chunks: Chunks | None, out: Encoded) -> dict[str, Any]:
    t = type(x)
    if t is OrderedDict:  # a module's state_dict: its _metadata (versions) matters to loading
        return {"__flor_odict__": list(x.items()), "meta": getattr(x, "_metadata", None)}
    if isinstance(x, torch.Tensor):
        if chunks is not None and _blobbable(x):
            return {"__flor_chunks__": chunks.put_tensor(x, out), **_form(x)}
        if not _raw_ok(x):
            raise _NotPlain
        return {"__flor_raw__": _raw(x), "dtype": _dtype(x), "shape": list(x.shape)}
    if t is LargeBytes and chunks is not None:
        return {"__flor_bytes__": chunks.put_bytes(x, out)}
    if t in _TAGS:
        return {_TAGS[t]: str(x)}
    if t is torch.Size:
        return {"__flor_size__": list(x)}
    raise _NotPlain


class _NoClasses(pickle.Unpickler):
    """Plain values only: a manifest that names any class but ``dict`` (its tagged values),
    ``bytes`` and ``complex`` is not one flor wrote."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _CLASSES:
            return _CLASSES[name]
        raise pickle.UnpicklingError(f"{module}.{name}")


_CLASSES = MappingProxyType({"bytes": bytes, "complex": complex, "dict": dict})
_TAGS = MappingProxyType({torch.dtype: "__flor_dtype__", torch.device: "__flor_device__"})


def _raw_ok(t: torch.Tensor) -> bool:
    return t.layout == torch.strided and t.device.type == "cpu" and not t.is_quantized


# dtypes numpy holds: their bytes in one call (a checkpoint's tensors are contiguous copies);
# the general path is four torch calls more per tensor, 4 us of a checkpoint's dozens.
_NUMPY_DTYPES = frozenset(
    {torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.int16}
    | {torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128}
)


def _raw(t: torch.Tensor) -> bytes:
    raw: bytes
    if t.dtype in _NUMPY_DTYPES and not t.requires_grad and t.is_contiguous():
        raw = t.numpy().tobytes()
    else:
        raw = t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    return raw


def packed_copy(t: torch.Tensor, nbytes: int, pack: Pack) -> dict[str, Any] | None:
    """A small CPU tensor's bytes copied in one call as a piece of ``pack`` (the checkpoint's
    pack of whole copies), in the form ``_tagged`` gives a large one. A tensor copy, and its
    bytes pickled into the manifest later, cost several times as much on the training thread,
    and a transformer's checkpoint holds hundreds of them; the writer hashes the pack. None
    where its memory is not its values, densely (a view with gaps, conjugate or negative
    bits, quantized), for an empty one, and once the pack is full. ``nbytes``: its size."""
    if not (
        nbytes
        and type(t) in _PLAIN_TENSORS
        and t.is_cpu
        and t.layout == torch.strided
        and t.is_contiguous()
        and pack.nbytes + nbytes <= PACK_MAX
        and not (t.is_quantized or t.is_conj() or t.is_neg() or t.is_nested)
    ):
        return None
    piece = ctypes.string_at(t.data_ptr(), nbytes)
    return {"__flor_chunks__": [pack.add(piece)], "dtype": _dtype(t), "shape": list(t.shape)}


_PLAIN_TENSORS = frozenset({torch.Tensor, torch.nn.Parameter})


def _dtype(t: torch.Tensor) -> str:
    name = _DTYPE_NAMES.get(t.dtype)  # half the time of formatting it, for each small tensor
    return str(t.dtype).removeprefix("torch.") if name is None else name


_DTYPE_NAMES = MappingProxyType(
    {d: str(d).removeprefix("torch.") for d in vars(torch).values() if isinstance(d, torch.dtype)}
)


def _tensor(raw: bytes | bytearray, dtype: str, shape: list[int]) -> torch.Tensor:
    kind = getattr(torch, dtype)
    if not raw:
        return torch.empty(shape, dtype=kind)
    # A copy into torch's own memory: a tensor over a Python buffer cannot be resized
    # (``resize_``), which the script may do to what replay restores.
    buf = raw if isinstance(raw, bytearray) else bytearray(raw)  # frombuffer warns on bytes
    data = torch.frombuffer(buf, dtype=torch.uint8).clone()
    return data.view(kind).reshape(shape)


def _blobbable(t: torch.Tensor) -> bool:
    return (
        type(t) is torch.Tensor
        and t.layout == torch.strided
        and t.device.type == "cpu"
        and not t.is_quantized
        and t.numel() * t.element_size() >= BLOB_MIN_BYTES
    )


def _split(x: Any, chunks: Chunks | None, out: Encoded) -> Any:
    """``tree`` for torch.save: its large tensors as chunks, its large pickles as bytes."""
    if isinstance(x, torch.Tensor) and chunks is not None and _blobbable(x):
        return {"__flor_chunks__": chunks.put_tensor(x, out), **_form(x)}
    if type(x) is LargeBytes:
        return bytes(x)
    if isinstance(x, dict):
        return {k: _split(v, chunks, out) for k, v in x.items()}
    if isinstance(x, list):
        return [_split(v, chunks, out) for v in x]
    if isinstance(x, tuple):
        return tuple(_split(v, chunks, out) for v in x)
    return x


def _form(t: torch.Tensor) -> dict[str, Any]:
    return {"dtype": _dtype(t), "shape": list(t.shape)}


def _join(x: Any, blobs: _Blobs) -> Any:
    if isinstance(x, dict):
        if set(x) == {"__flor_pickle__"}:
            pickled = _join(x["__flor_pickle__"], blobs)
            return unpickle.loads(pickled, blobs.key)
        if "__flor_chunks__" in x:
            return _load_chunks(x, blobs)
        if set(x) == {"__flor_bytes__"}:
            return bytes(blobs.join(x["__flor_bytes__"]))
        if "__flor_blob__" in x:  # a whole-tensor blob: what checkpoints held before chunks
            return _tensor(blobs.blob(x["__flor_blob__"]), x["dtype"], x["shape"])
        if "__flor_odict__" in x:
            return _ordered(x, blobs)
        if "__flor_raw__" in x:
            return _tensor(x["__flor_raw__"], x["dtype"], x["shape"])
        if len(x) == 1:
            ((tag, value),) = x.items()
            if tag == "__flor_dtype__":
                return getattr(torch, value.removeprefix("torch."))
            if tag == "__flor_device__":
                return torch.device(value)
            if tag == "__flor_size__":
                return torch.Size(value)
        for k, v in x.items():
            x[k] = _join(v, blobs)
    elif isinstance(x, list):
        x[:] = [_join(v, blobs) for v in x]
    elif isinstance(x, tuple):
        return tuple(_join(v, blobs) for v in x)
    return x


def _ordered(x: dict[str, Any], blobs: _Blobs) -> OrderedDict[Any, Any]:
    out = OrderedDict((k, _join(v, blobs)) for k, v in x["__flor_odict__"])
    if x["meta"] is not None:
        out._metadata = _join(x["meta"], blobs)  # type: ignore[attr-defined]
    return out


def _load_chunks(ref: dict[str, Any], blobs: _Blobs) -> torch.Tensor:
    raw = blobs.join(ref["__flor_chunks__"])
    if len(raw) != math.prod(ref["shape"]) * getattr(torch, ref["dtype"]).itemsize:
        raise CorruptCheckpoint(blobs.key, "its chunks do not add up to its tensor's size")
    return _tensor(raw, ref["dtype"], ref["shape"])


class VerifiedBlobs:
    """Blobs read and checked against their hash already, the most recently used first, up
    to ``max_bytes``: the restores of one replay share most of theirs (the replay buffer's
    chunks that stopped changing, a target network's pack), and a blob's key is its hash,
    so its bytes never change."""

    def __init__(self, max_bytes: int = 128 << 20) -> None:
        self.max_bytes = max_bytes
        self._blobs: OrderedDict[str, bytes] = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()  # the replay's thread and its prefetching one

    def get(self, sha: str) -> bytes | None:
        with self._lock:
            raw = self._blobs.get(sha)
            if raw is not None:
                self._blobs.move_to_end(sha)
            return raw

    def add(self, sha: str, raw: bytes) -> None:
        with self._lock:
            if sha in self._blobs or len(raw) > self.max_bytes:
                return
            self._blobs[sha] = raw
            self._nbytes += len(raw)
            while self._nbytes > self.max_bytes:
                _, dropped = self._blobs.popitem(last=False)
                self._nbytes -= len(dropped)


class _Blobs:
    """The blobs one checkpoint refers to, each checked against its hash as it is read (or
    found in ``verified``); a pack once, however many of its pieces the checkpoint holds."""

    def __init__(self, store: Store | None, key: str, verified: VerifiedBlobs | None) -> None:
        self.store = store
        self.key = key
        self.verified = verified
        self._packs: dict[str, bytes] = {}

    def join(self, refs: list[Any]) -> bytearray:
        """The bytes of a chunk list: hashes of chunks, or ``[pack, offset, bytes, pack bytes]``."""
        out = bytearray()
        for ref in refs:
            if isinstance(ref, str):
                out += self.blob(ref)
                continue
            sha, offset, nbytes, total = ref
            pack = self._packs.get(sha)
            if pack is None:
                pack = self._packs[sha] = self.blob(sha)
            if len(pack) != total or offset + nbytes > total:
                raise CorruptCheckpoint(self.key, f"its pack {sha[:12]} is not the size it names")
            out += memoryview(pack)[offset : offset + nbytes]
        return out

    def blob(self, sha: str) -> bytes:
        known = self.verified.get(sha) if self.verified is not None else None
        if known is not None:
            return known
        raw = self._read(sha)
        if self.verified is not None:
            self.verified.add(sha, raw)
        return raw

    def _read(self, sha: str) -> bytes:
        if self.store is None:
            raise CorruptCheckpoint(self.key, "it refers to tensor blobs but no store was given")
        try:
            raw = self.store.get(blob_key(sha))
        except KeyError:
            raise CorruptCheckpoint(self.key, f"its tensor blob {sha[:12]} is missing") from None
        if hashlib.sha256(raw).hexdigest() != sha:
            raise CorruptCheckpoint(self.key, f"its tensor blob {sha[:12]} fails its checksum")
        return raw
