"""A restored block's state put back where its ``SkipBlock.end`` finds it.

The checkpoint's tree holds the values ``end`` was given (positional, named), the stateful
objects of the scope and its cheap values, and the RNG streams; each goes back in place
(``runtime.state.restore``), and what ``end`` returns is what the full run's block left.
"""

from __future__ import annotations

from typing import Any

from flor.runtime.state.kinds import stateful_in_scope
from flor.runtime.state.restore import restore, restore_rng
from flor.runtime.state.scope import Frame, bind, same, visible_names
from flor.runtime.state.unbound import UNBOUND


def restore_block(
    tree: Any,
    objs: tuple[Any, ...],
    named: dict[str, Any],
    frame: Frame,
    positional: tuple[str | None, ...],
    rebound: frozenset[str] | None,
) -> tuple[Any, ...]:
    """Put the checkpointed state where the block's end finds it; what ``end`` returns.
    ``positional``: the names ``end``'s positional values have in the script (for messages);
    ``rebound``: the names the loop assigns (None: unknown, rebind every saved value)."""
    done: dict[int, Any] = {}
    values = tree.get("values", {})
    held = {**values, **tree.get("named", {})}
    restored = tuple(
        restore(o, node, done, label(positional, i))
        for i, (o, node) in enumerate(zip(objs, tree["objs"]))
    )
    unbound = {"k": "unbound"}  # a name the recording's scope had not bound yet
    restored += tuple(restore(v, held.get(k, unbound), done, k) for k, v in named.items())
    now = stateful_in_scope(visible_names(frame))
    for path, node in tree.get("scope", {}).items():
        if path in now:
            restore(now[path], node, done, path)
    _rebind_values(frame, values, done, rebound)
    restore_rng(tree["rng"])
    return restored


def label(names: tuple[str | None, ...], i: int) -> str:
    """What ``end``'s ``i``-th positional value is called in messages."""
    name = names[i] if i < len(names) else None
    return name or f"value {i + 1} of SkipBlock.end"


def _rebind_values(
    frame: Frame, values: dict[str, Any], done: dict[int, Any], rebound: frozenset[str] | None
) -> None:
    """Rebind the scope's saved values where this process's differ (a segment's first
    iteration, names the skipped block bound); equal ones keep their identity. A name the
    loop never assigns (not in ``rebound``) is only refilled in place (a list it appends
    to), never rebound."""
    current = frame.f_locals
    changed = {}
    for name, node in values.items():
        cur = current.get(name, UNBOUND)
        new = restore(cur, node, done, name)
        if rebound is not None and name not in rebound:
            continue
        if cur is UNBOUND or not same(cur, new):
            changed[name] = new
    bind(frame, changed)
