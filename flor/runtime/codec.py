"""Checkpoint bytes: ``torch.save`` of a snapshot tree, with a SHA-256 checksum.

Loading always uses weights-only unpickling. Opaque leaves (a user's plain
object, a numpy array) travel as pickled bytes inside the tree and are
unpickled only after the whole blob matched the checksum in its journal entry.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from typing import Any

import torch

from flor.errors import CorruptCheckpoint


def encode(tree: Any) -> tuple[bytes, str]:
    """Serialize ``tree``; return the bytes and their SHA-256 hex digest."""
    buf = io.BytesIO()
    torch.save(tree, buf)
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def decode(data: bytes, sha256: str, key: str) -> Any:
    """Verify ``data`` against ``sha256``, then load it without running code."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CorruptCheckpoint(key, "checksum mismatch (the file was changed or truncated)")
    try:
        tree = torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:
        raise CorruptCheckpoint(key, f"not a flor checkpoint ({type(e).__name__})") from None
    return _unpickle_leaves(tree)


def _unpickle_leaves(x: Any) -> Any:
    if isinstance(x, dict):
        if set(x) == {"__flor_pickle__"}:
            return pickle.loads(x["__flor_pickle__"])  # checksum verified by decode()
        for k, v in x.items():
            x[k] = _unpickle_leaves(v)
    elif isinstance(x, list):
        x[:] = [_unpickle_leaves(v) for v in x]
    elif isinstance(x, tuple):
        return tuple(_unpickle_leaves(v) for v in x)
    return x
