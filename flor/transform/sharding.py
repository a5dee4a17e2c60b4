"""Training whose state is sharded across ranks, which flor cannot record yet.

FSDP (``FullyShardedDataParallel``, ``fully_shard``) keeps a slice of every
parameter on each rank, and ``torch.distributed.checkpoint`` saves such
slices. A checkpoint of one rank's ``state_dict`` is then neither the model
nor restorable on its own, so ``flor run`` refuses these scripts up front
rather than record something replay would restore wrongly.
"""

from __future__ import annotations

import ast

from flor.sources import python_ast

SHARDED_NAMES = frozenset({"FullyShardedDataParallel", "fully_shard"})
SHARDED_MODULES = ("torch.distributed.fsdp", "torch.distributed.checkpoint")


def sharded_state(source: str, filename: str) -> str | None:
    """``FILE:LINE: WHAT`` for the first use of sharded training in ``source``; None if none
    (or if it does not parse: python reports that itself)."""
    try:
        tree = python_ast(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        what = _sharded(node)
        if what is not None:
            return f"{filename}:{getattr(node, 'lineno', 0)}: {what}"
    return None


def _sharded(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, ast.Name) and node.id in SHARDED_NAMES:
        return node.id
    elif isinstance(node, ast.Attribute) and node.attr in SHARDED_NAMES:
        return node.attr
    else:
        return None
    for name in names:
        if name.startswith(SHARDED_MODULES) or name.rsplit(".", 1)[-1] in SHARDED_NAMES:
            return name
    return None
