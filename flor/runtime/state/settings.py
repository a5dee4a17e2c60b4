"""The settings a script gave its training objects, and which of them a fork takes from
today's script.

An optimizer's learning rate and weight decay, a scheduler's step size or gamma: the
non-tensor values of a ``state_dict`` other than a module's (whose ``state_dict`` holds
only learned tensors). A recording notes them as the script set them up, before its first
iteration (``of``). A fork (``flor run --from RUN@K``) restores the learned state of RUN
at iteration K (weights, optimizer buffers and step counts, where a scheduler is), and
where today's script sets a value up differently from how RUN's did, the edit meant it:
today's value wins from the fork point on (``fork_settings``, then ``apply``).

Leaves are named by their path in the ``state_dict``: ``param_groups.0.lr``, ``gamma``.
An optimizer's per-parameter ``state`` and a group's ``params`` are learned or structural,
never settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from flor.runtime.state.kinds import stateful_in_scope
from flor.runtime.state.scope import Frame, visible_names

SCALARS = (bool, int, float, str, type(None))
Settings = dict[str, dict[str, Any]]  # an object's path in scope -> leaf path -> value


def in_scope(frame: Frame) -> dict[str, Any]:
    """The objects whose settings count: those a checkpoint of ``frame``'s scope holds."""
    return stateful_in_scope(visible_names(frame))


def of(objects: Mapping[str, Any]) -> Settings:
    """The settings of each object in ``objects`` (a scope's ``stateful_in_scope``) that has
    any."""
    found: Settings = {}
    for path, obj in objects.items():
        if isinstance(obj, torch.nn.Module) or not callable(getattr(obj, "state_dict", None)):
            continue
        try:
            state = obj.state_dict()
        except Exception:  # a state_dict that needs what the loop sets up: none noted
            continue
        leaves = dict(_leaves(state, (), isinstance(obj, torch.optim.Optimizer)))
        if leaves:
            found[path] = leaves
    return found


def _leaves(node: Any, path: tuple[str, ...], optimizer: bool) -> Any:
    if isinstance(node, SCALARS):
        yield ".".join(path), node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            if not isinstance(key, str) or "." in key:
                continue
            if optimizer and (key == "params" or (not path and key == "state")):
                continue  # learned (per-parameter buffers), or which parameters: not settings
            yield from _leaves(value, (*path, key), optimizer)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _leaves(value, (*path, str(i)), optimizer)


def fork_settings(
    parent_setup: Mapping[str, Mapping[str, Any]] | None, today: Settings, at_fork: Settings
) -> tuple[Settings, list[str]]:
    """Which of ``today``'s set-up values win over the restored ones (``at_fork``, the
    parent's at the fork point): those today's script sets up differently from the
    parent's (``parent_setup``; None: not noted, an older recording). Also what to tell
    the user, a line each: the values changed, and where flor cannot tell which wins."""
    if parent_setup is None:
        differ = sorted(
            f"{path}.{leaf}"
            for path, leaves in today.items()
            for leaf, value in leaves.items()
            if at_fork.get(path, {}).get(leaf, value) != value
        )
        if not differ:
            return {}, []
        return {}, [
            f"the parent run did not note its set-up values, so flor cannot tell whether "
            f"today's set-up or the checkpoint should win for {_listed(differ)}: the "
            "checkpoint's are kept; set today's after the fork point in the script if you "
            "changed them"
        ]
    wins: Settings = {}
    said = []
    for path, leaves in today.items():
        before = parent_setup.get(path, {})
        changed = {leaf: v for leaf, v in leaves.items() if leaf in before and before[leaf] != v}
        if not changed:
            continue
        wins[path] = changed
        parts = []
        for leaf, value in changed.items():
            restored = at_fork.get(path, {}).get(leaf, before[leaf])
            moved = f" ({_shown(restored)} at the fork point)" if restored != before[leaf] else ""
            parts.append(f"{leaf} {_shown(before[leaf])} -> {_shown(value)}{moved}")
        said.append(f"today's set-up wins for {path}: {', '.join(parts)}")
    return wins, said


def _shown(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def apply(objects: Mapping[str, Any], wins: Mapping[str, Mapping[str, Any]]) -> None:
    """Set the values ``wins`` names on the objects found at their paths."""
    for path, leaves in wins.items():
        obj = objects.get(path)
        if obj is None:
            continue
        state = obj.state_dict()
        for leaf, value in leaves.items():
            state = _with(state, leaf.split("."), value)
        obj.load_state_dict(state)


def _with(node: Any, path: list[str], value: Any) -> Any:
    """``node`` with the leaf at ``path`` set to ``value`` (containers copied, not changed)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, Mapping):
        return {**node, head: _with(node[head], rest, value)}
    items = list(node)
    items[int(head)] = _with(items[int(head)], rest, value)
    return tuple(items) if isinstance(node, tuple) else items
