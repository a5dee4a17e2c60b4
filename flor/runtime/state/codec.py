"""Checkpoint bytes: a small manifest plus content-addressed chunks.

A checkpoint is a pickle of plain values (its manifest) in which every large
tensor and every large byte string (a pickled object) is replaced by the list
of its 64 KiB chunks' SHA-256 (``chunks``): each chunk is stored once for the
whole store (``.blobs/ab/abcd...``). A tensor that did not change since the
last checkpoint, the rows of a replay buffer that did not, a frozen backbone
another run already stored: none of them cost bytes again. Small tensors stay
inline, where a blob per bias vector would cost more than it saves.

Loading uses an unpickler that resolves no class and checks every byte: the
manifest against the SHA-256 in its journal entry, each chunk against its key.
Opaque leaves (a user's plain object) travel as pickled bytes and are
unpickled only after their manifest matched, by ``unpickle``'s loader, which
resolves no function that could act on the machine.
"""

from __future__ import annotations

import hashlib
import io
import math
import pickle
from collections import OrderedDict
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

from flor.errors import CorruptCheckpoint
from flor.runs.layout import blob_key
from flor.runtime.state import unpickle
from flor.runtime.state.chunks import Chunks
from flor.store import Store

BLOB_MIN_BYTES = 64 * 1024


@dataclass
class Encoded:
    data: bytes  # the manifest
    sha256: str
    blobs: dict[str, int] = field(default_factory=dict)  # blob sha256 -> bytes
    new_blob_bytes: int = 0  # blob bytes the store did not hold yet
    created: set[str] = field(default_factory=set)  # the blobs this write put in the store

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


class _NotPlain(Exception):
    pass


def encode(tree: Any, store: Store | None = None, chunks: Chunks | None = None) -> Encoded:
    """Serialize ``tree``; with a ``store``, put its large values there as chunks
    (through ``chunks``, which knows what this run already stored)."""
    if chunks is None and store is not None:
        chunks = Chunks(store)
    out = Encoded(b"", "")
    try:
        out.data = MANIFEST + pickle.dumps(_plain(tree, chunks, out), protocol=5)
    except _NotPlain:
        out = Encoded(b"", "")
        buf = io.BytesIO()
        torch.save(_split(tree, chunks, out) if chunks is not None else tree, buf)
        out.data = buf.getvalue()
    out.sha256 = hashlib.sha256(out.data).hexdigest()
    return out


def decode(data: bytes, sha256: str, key: str, store: Store | None = None) -> Any:
    """Verify ``data`` against ``sha256``, then load it (and its blobs) without running code."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CorruptCheckpoint(key, "checksum mismatch (the file was changed or truncated)")
    try:
        if data.startswith(MANIFEST):
            tree = _NoClasses(io.BytesIO(memoryview(data)[len(MANIFEST) :])).load()
        else:
            tree = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:
        raise CorruptCheckpoint(key, f"not a flor checkpoint ({type(e).__name__})") from None
    tree = _join(tree, store, key)
    unpickle.preload(tree, key)
    return tree


class _NoClasses(pickle.Unpickler):
    """Plain values only: a manifest that names any class is not one flor wrote."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("builtins", "complex"):
            return complex
        raise pickle.UnpicklingError(f"{module}.{name}")


_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_TAGS = MappingProxyType({torch.dtype: "__flor_dtype__", torch.device: "__flor_device__"})


def _plain(x: Any, chunks: Chunks | None, out: Encoded) -> Any:
    t = type(x)
    if t is bytes and chunks is not None and len(x) >= BLOB_MIN_BYTES:
        return {"__flor_bytes__": chunks.put_bytes(x, out)}
    if t in _PLAIN:
        return x
    if t is dict:
        return {k: _plain(v, chunks, out) for k, v in x.items()}
    if t is OrderedDict:  # a module's state_dict: its _metadata (versions) matters to loading
        return {
            "__flor_odict__": [(k, _plain(v, chunks, out)) for k, v in x.items()],
            "meta": _plain(getattr(x, "_metadata", None), chunks, out),
        }
    if t is list:
        return [_plain(v, chunks, out) for v in x]
    if t is tuple:
        return tuple(_plain(v, chunks, out) for v in x)
    if isinstance(x, torch.Tensor):
        if chunks is not None and _blobbable(x):
            return {"__flor_chunks__": chunks.put_tensor(x, out), **_form(x)}
        if not _raw_ok(x):
            raise _NotPlain
        return {"__flor_raw__": _raw(x), "dtype": _dtype(x), "shape": list(x.shape)}
    if t in _TAGS:
        return {_TAGS[t]: str(x)}
    if t is torch.Size:
        return {"__flor_size__": list(x)}
    raise _NotPlain


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


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


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


def _split(x: Any, chunks: Chunks, out: Encoded) -> Any:
    if isinstance(x, torch.Tensor) and _blobbable(x):
        return {"__flor_chunks__": chunks.put_tensor(x, out), **_form(x)}
    if isinstance(x, dict):
        return {k: _split(v, chunks, out) for k, v in x.items()}
    if isinstance(x, list):
        return [_split(v, chunks, out) for v in x]
    if isinstance(x, tuple):
        return tuple(_split(v, chunks, out) for v in x)
    return x


def _form(t: torch.Tensor) -> dict[str, Any]:
    return {"dtype": _dtype(t), "shape": list(t.shape)}


def _join(x: Any, store: Store | None, key: str) -> Any:
    if isinstance(x, dict):
        if set(x) == {"__flor_pickle__"}:
            pickled = _join(x["__flor_pickle__"], store, key)
            return unpickle.loads(pickled, key)
        if "__flor_chunks__" in x:
            return _load_chunks(x, store, key)
        if set(x) == {"__flor_bytes__"}:
            return bytes(_chunk_bytes(x["__flor_bytes__"], store, key))
        if "__flor_blob__" in x:  # a whole-tensor blob: what checkpoints held before chunks
            return _load_blob(x, store, key)
        if "__flor_odict__" in x:
            return _ordered(x, store, key)
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
            x[k] = _join(v, store, key)
    elif isinstance(x, list):
        x[:] = [_join(v, store, key) for v in x]
    elif isinstance(x, tuple):
        return tuple(_join(v, store, key) for v in x)
    return x


def _ordered(x: dict[str, Any], store: Store | None, key: str) -> OrderedDict[Any, Any]:
    out = OrderedDict((k, _join(v, store, key)) for k, v in x["__flor_odict__"])
    if x["meta"] is not None:
        out._metadata = _join(x["meta"], store, key)  # type: ignore[attr-defined]
    return out


def _load_chunks(ref: dict[str, Any], store: Store | None, key: str) -> torch.Tensor:
    raw = _chunk_bytes(ref["__flor_chunks__"], store, key)
    if len(raw) != math.prod(ref["shape"]) * getattr(torch, ref["dtype"]).itemsize:
        raise CorruptCheckpoint(key, "its chunks do not add up to its tensor's size")
    return _tensor(raw, ref["dtype"], ref["shape"])


def _chunk_bytes(shas: list[str], store: Store | None, key: str) -> bytearray:
    out = bytearray()
    for sha in shas:
        out += _blob(sha, store, key)
    return out


def _blob(sha: str, store: Store | None, key: str) -> bytes:
    if store is None:
        raise CorruptCheckpoint(key, "it refers to tensor blobs but no store was given")
    try:
        raw = store.get(blob_key(sha))
    except KeyError:
        raise CorruptCheckpoint(key, f"its tensor blob {sha[:12]} is missing") from None
    if hashlib.sha256(raw).hexdigest() != sha:
        raise CorruptCheckpoint(key, f"its tensor blob {sha[:12]} fails its checksum")
    return raw


def _load_blob(ref: dict[str, Any], store: Store | None, key: str) -> torch.Tensor:
    return _tensor(_blob(ref["__flor_blob__"], store, key), ref["dtype"], ref["shape"])
