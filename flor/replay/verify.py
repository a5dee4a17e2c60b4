"""Replay checks itself: a block re-executed where the record has its checkpoint must end
in the recorded state.

A difference means the block is not a function of what flor restores: a
nondeterministic kernel, a private random generator nobody seeds, a data loader
whose workers reorder batches. Hindsight values computed from such a replay may
not be what the recorded run saw, and the user is told, naming the iteration and
the first object that differs. Only tensors are compared (parameters, buffers,
optimizer moments, gradients, tensors in containers), each by its SHA-256:
scalars in a block's state are often timings, which legitimately differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import torch

from flor.runtime.state.capture import Snapshot, capture


def tensors(node: Any) -> Iterator[torch.Tensor]:
    """The tensors of a snapshot node (or of a state_dict tree inside one), in order."""
    if isinstance(node, torch.Tensor):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            if key not in ("k", "id", "flags", "cls"):
                yield from tensors(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from tensors(value)


def digest(node: Any) -> str:
    h = hashlib.sha256()
    for t in tensors(node):
        t = t.detach().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def state_nodes(
    objs: tuple[Any, ...], named: dict[str, Any], scope: dict[str, Any], labels: list[str]
) -> dict[str, Any]:
    """The live state a block ended with, captured as the record captures it, by label."""
    snap = Snapshot()
    out = {label: capture(o, snap) for label, o in zip(labels, objs)}
    out.update({k: capture(v, snap) for k, v in named.items()})
    for path, value in scope.items():  # captured after, like the record: a listed name wins
        out.setdefault(path, capture(value, snap))
    return out


def recorded_nodes(tree: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    out = dict(zip(labels, tree["objs"]))
    out.update(tree.get("named", {}))
    for path, node in tree.get("scope", {}).items():
        out.setdefault(path, node)
    return out


def first_difference(live: dict[str, Any], recorded: dict[str, Any]) -> str | None:
    """The first state object whose tensors differ from the record's, or None if all match.

    A shared object is captured once and referred to after, so each side resolves
    references within itself before comparing.
    """
    live_ids = _by_id(live)
    recorded_ids = _by_id(recorded)
    for name, node in recorded.items():
        if name not in live:
            continue
        if digest(_resolve(live[name], live_ids)) != digest(_resolve(node, recorded_ids)):
            return name
    return None


def _by_id(nodes: dict[str, Any]) -> dict[int, Any]:
    return {n["id"]: n for n in nodes.values() if isinstance(n, dict) and "id" in n}


def _resolve(node: Any, ids: dict[int, Any]) -> Any:
    if isinstance(node, dict) and node.get("k") == "ref":
        return ids.get(node["v"], {})
    return node


def torch_rng_matches(rng: dict[str, Any]) -> bool:
    return bool(torch.equal(torch.get_rng_state(), rng["torch"]))
