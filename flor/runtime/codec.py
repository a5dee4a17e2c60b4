"""Checkpoint bytes: a small manifest plus content-addressed tensor blobs.

A checkpoint is ``torch.save`` of its snapshot tree in which every large
tensor is replaced by a reference to a blob: the tensor's raw bytes, stored
once under their SHA-256 (``.blobs/ab/abcd...``) for the whole store. A tensor
that did not change since the last checkpoint, or that another run already
stored (a frozen backbone), costs no bytes. Small tensors stay inline, where
a blob per bias vector would cost more than it saves.

Loading always uses weights-only unpickling and checks every byte: the
manifest against the SHA-256 in its journal entry, each blob against its key.
Opaque leaves (a user's plain object, a numpy array) travel as pickled bytes
and are unpickled only after their manifest matched.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from dataclasses import dataclass, field
from typing import Any

import torch

from flor.errors import CorruptCheckpoint
from flor.runs.layout import blob_key
from flor.store import Store

BLOB_MIN_BYTES = 64 * 1024


@dataclass
class Encoded:
    data: bytes  # the manifest
    sha256: str
    blobs: dict[str, int] = field(default_factory=dict)  # blob sha256 -> bytes
    new_blob_bytes: int = 0  # blob bytes the store did not hold yet

    @property
    def logical(self) -> int:
        """What the checkpoint would take without deduplication."""
        return len(self.data) + sum(self.blobs.values())

    @property
    def stored(self) -> int:
        """What it added to the store."""
        return len(self.data) + self.new_blob_bytes


def encode(tree: Any, store: Store | None = None) -> Encoded:
    """Serialize ``tree``; with a ``store``, put its large tensors there as blobs."""
    out = Encoded(b"", "")
    if store is not None:
        tree = _split(tree, store, out)
    buf = io.BytesIO()
    torch.save(tree, buf)
    out.data = buf.getvalue()
    out.sha256 = hashlib.sha256(out.data).hexdigest()
    return out


def decode(data: bytes, sha256: str, key: str, store: Store | None = None) -> Any:
    """Verify ``data`` against ``sha256``, then load it (and its blobs) without running code."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CorruptCheckpoint(key, "checksum mismatch (the file was changed or truncated)")
    try:
        tree = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:
        raise CorruptCheckpoint(key, f"not a flor checkpoint ({type(e).__name__})") from None
    return _join(tree, store, key)


def _blobbable(t: torch.Tensor) -> bool:
    return (
        type(t) is torch.Tensor
        and t.layout == torch.strided
        and t.device.type == "cpu"
        and not t.is_quantized
        and t.numel() * t.element_size() >= BLOB_MIN_BYTES
    )


def _split(x: Any, store: Store, out: Encoded) -> Any:
    if isinstance(x, torch.Tensor) and _blobbable(x):
        raw: bytes = x.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        sha = hashlib.sha256(raw).hexdigest()
        if sha not in out.blobs and store.put_blob(blob_key(sha), raw):
            out.new_blob_bytes += len(raw)
        out.blobs[sha] = len(raw)
        return {
            "__flor_blob__": sha,
            "dtype": str(x.dtype).removeprefix("torch."),
            "shape": list(x.shape),
        }
    if isinstance(x, dict):
        return {k: _split(v, store, out) for k, v in x.items()}
    if isinstance(x, list):
        return [_split(v, store, out) for v in x]
    if isinstance(x, tuple):
        return tuple(_split(v, store, out) for v in x)
    return x


def _join(x: Any, store: Store | None, key: str) -> Any:
    if isinstance(x, dict):
        if set(x) == {"__flor_pickle__"}:
            return pickle.loads(x["__flor_pickle__"])  # the manifest's checksum matched
        if "__flor_blob__" in x:
            return _load_blob(x, store, key)
        for k, v in x.items():
            x[k] = _join(v, store, key)
    elif isinstance(x, list):
        x[:] = [_join(v, store, key) for v in x]
    elif isinstance(x, tuple):
        return tuple(_join(v, store, key) for v in x)
    return x


def _load_blob(ref: dict[str, Any], store: Store | None, key: str) -> torch.Tensor:
    sha = ref["__flor_blob__"]
    if store is None:
        raise CorruptCheckpoint(key, "it refers to tensor blobs but no store was given")
    try:
        raw = store.get(blob_key(sha))
    except KeyError:
        raise CorruptCheckpoint(key, f"its tensor blob {sha[:12]} is missing") from None
    if hashlib.sha256(raw).hexdigest() != sha:
        raise CorruptCheckpoint(key, f"its tensor blob {sha[:12]} fails its checksum")
    dtype = getattr(torch, ref["dtype"])
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return flat.view(dtype).reshape(ref["shape"])
