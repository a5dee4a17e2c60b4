"""Restore a captured block's state in place, and say what each name is bound to after.

- objects with ``state_dict``/``load_state_dict`` (modules, optimizers, schedulers,
  GradScaler, EMA) are loaded in place, so aliases stay valid;
- containers (list, dict, set) and plain objects (``self``) are refilled in place, their
  items and attributes restored recursively;
- parameters and other grad-requiring leaves are copied into in place;
- other tensors, numpy arrays and values are rebound to the recorded value;
- a DataLoader or sampler is moved to its recorded position (the counters it advances as
  it is iterated, the generators it draws from); its dataset is never saved;
- read-only inputs and sinks (datasets, files, modules, functions, loggers, progress bars)
  are neither saved nor touched.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import torch

from flor.errors import FlorError
from flor.runtime.state import loader_position, unpickle
from flor.runtime.state.kinds import (
    NUMPY_BIT_GENERATORS,
    is_wrapper,
    kept_attrs,
    numpy_seed,
    plain_object,
    positioned,
    set_flags,
    stateful,
)
from flor.runtime.state.unbound import UNBOUND

_MISSING = object()


def _restore_array(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    """A new array, like an unpickled one: the name is rebound, as for any other value."""
    import numpy as np

    raw: torch.Tensor = node["v"]
    shape = node["shape"]
    flat = raw.numpy().view(np.dtype(node["dtype"])).copy()
    if node["fortran"]:
        return flat.reshape(shape[::-1]).T
    return flat.reshape(shape)


def _restore_scalar(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    import numpy as np

    return np.frombuffer(node["v"], dtype=np.dtype(node["dtype"]))[0]


def _restore_numpy_generator(
    cur: Any, node: dict[str, Any], done: dict[int, Any], path: str
) -> Any:
    """In place where this process's generator is of the same kind and seed (only its state
    moved); else a new one, as unpickling it would give."""
    import numpy as np

    name = node["bitgen"]
    if name not in NUMPY_BIT_GENERATORS:
        raise CannotRestore(path, "a numpy Generator", f"{name!r} is not a numpy bit generator")
    entropy, spawn_key, pool_size, spawned = node["seed"]
    bitgen: Any = getattr(cur, "bit_generator", None)
    seq = getattr(bitgen, "seed_seq", None)
    same = (
        type(cur) is np.random.Generator
        and type(bitgen).__name__ == name
        and type(seq) is np.random.SeedSequence
        and numpy_seed(seq) == node["seed"]
    )
    if not same:
        seq = np.random.SeedSequence(
            entropy, spawn_key=spawn_key, pool_size=pool_size, n_children_spawned=spawned
        )
        bitgen = getattr(np.random, name)(seq)
        cur = np.random.Generator(bitgen)
    bitgen.state = node["state"]
    return cur


class CannotRestore(FlorError):
    """A checkpointed value with nothing to restore it into; ``path`` names it from its root."""

    def __init__(self, path: str, what: str, why: str) -> None:
        super().__init__("cannot-restore", f"cannot restore {path} ({what}): {why}")
        self.path = path


def restore(
    cur: Any, node: dict[str, Any], done: dict[int, Any] | None = None, path: str = "a value"
) -> Any:
    """Restore ``node`` into ``cur`` where it can, and return what to bind the name to.

    ``done`` maps the snapshot's object ids to what they were restored as: an
    object the snapshot holds twice is restored once, and shared again.
    """
    done = {} if done is None else done
    kind = node["k"]
    if kind == "ref":
        return done[node["v"]]
    if kind == "unbound":
        return UNBOUND
    if kind == "val":
        return node["v"]
    if kind == "passive":
        return cur
    if node["id"] in done:
        return done[node["id"]]
    result = _restore_new(cur, node, done, path)
    done[node["id"]] = result
    return result


def _restore_new(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    restorer = _RESTORERS.get(node["k"])
    if restorer is None:
        raise ValueError(f"unknown snapshot node {node['k']!r}")
    return restorer(cur, node, done, path)


def _restore_stateful(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    if not stateful(cur):
        raise CannotRestore(
            path,
            "an object with a state_dict",
            "this replay has no such object where the block ends (it is created inside the "
            "block, or the edit removed it)",
        )
    cur.load_state_dict(node["v"])
    set_flags(cur, node.get("flags", {}))
    if "grads" in node:
        for param, grad in zip(cur.parameters(), node["grads"]):
            param.grad = None if grad is None else grad.to(param.device)
    if "attrs" in node and isinstance(cur, torch.nn.Module):
        for i, (module, attrs) in enumerate(zip(cur.modules(), node["attrs"])):
            where = path if i == 0 else f"{path}.<submodule {i}>"
            if not is_wrapper(module):
                _restore_attrs(vars(module), attrs, done, where, kept_attrs(module))
    return cur


def _restore_generator(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    """In place: a DataLoader or sampler may hold the same generator."""
    gen = cur if isinstance(cur, torch.Generator) else torch.Generator(node["device"])
    gen.set_state(node["v"])
    return gen


def _restore_sequence(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    kind = node["k"]
    if isinstance(cur, list) and kind == "list":
        done[node["id"]] = cur  # before the items: they may refer back to it
    if "vals" in node:  # primitives only, saved as they are
        items = list(node["vals"])
    else:
        olds = list(cur) if isinstance(cur, (list, tuple)) else []
        items = [
            restore(olds[i] if i < len(olds) else _MISSING, n, done, f"{path}[{i}]")
            for i, n in enumerate(node["v"])
        ]
    if kind == "tuple":
        return tuple(items)
    if isinstance(cur, list):
        cur[:] = items
        return cur
    return items


def _restore_dict(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    old = cur if isinstance(cur, dict) else {}
    if isinstance(cur, dict):
        done[node["id"]] = cur
    entries = {
        k: restore(old.get(k, _MISSING), n, done, f"{path}[{k!r}]")
        for k, n in zip(node["keys"], node["v"])
    }
    if isinstance(cur, dict):
        cur.clear()
        cur.update(entries)
        return cur
    if not node.get("ordered"):
        return entries
    ordered = OrderedDict(entries)
    if "meta" in node:
        setattr(ordered, "_metadata", restore(None, node["meta"], done, f"{path}._metadata"))  # noqa: B010 (OrderedDict declares none)
    return ordered


def _restore_object(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    if cur is _MISSING or cur is UNBOUND or not plain_object(cur):
        cur = _new_instance(node, path, cur)
    done[node["id"]] = cur
    _restore_attrs(vars(cur), node["v"], done, path, frozenset())
    return cur


def _restore_pickled(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    new = node.pop("loaded") if "loaded" in node else unpickle.loads(node["v"], path)
    if isinstance(cur, (set, dict)) and type(cur) is type(new):
        cur.clear()
        cur.update(new)
        return cur
    return new


def _restore_loader_iterator(
    cur: Any, node: dict[str, Any], done: dict[int, Any], path: str
) -> Any:
    if not loader_position.is_loader_iterator(cur):
        raise CannotRestore(
            path,
            "a DataLoader iterator",
            "this replay has no iterator there when the block ends (the edit removed it?)",
        )
    try:
        return loader_position.restore(cur, node)
    except ValueError as e:
        raise CannotRestore(path, "a DataLoader iterator", str(e)) from None


def _restore_position(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    """Move this process's loader or sampler to the recorded position, in place."""
    if not positioned(cur):
        return cur  # the edit removed it: nothing to move
    done[node["id"]] = cur
    parts = {
        name: restore(getattr(cur, name, _MISSING), child, done, f"{path}.{name}")
        for name, child in node["parts"].items()
    }
    moved = {n: v for n, v in node["v"].items() if getattr(cur, n, _MISSING) != v}
    for name, value in parts.items():
        if value is not _MISSING and getattr(cur, name, _MISSING) is not value:
            moved[name] = value  # a generator created lazily, after the first epoch
    for name, value in moved.items():
        with contextlib.suppress(ValueError, AttributeError):  # a read-only property
            setattr(cur, name, value)
    return cur


def _restore_tensor_node(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    return _restore_tensor(cur, node)


_RESTORERS: Mapping[str, Callable[[Any, dict[str, Any], dict[int, Any], str], Any]] = (
    MappingProxyType(
        {
            "sd": _restore_stateful,
            "tensor": _restore_tensor_node,
            "param": _restore_tensor_node,
            "gen": _restore_generator,
            "list": _restore_sequence,
            "tuple": _restore_sequence,
            "dict": _restore_dict,
            "obj": _restore_object,
            "pickle": _restore_pickled,
            "ndarray": _restore_array,
            "npscalar": _restore_scalar,
            "npgen": _restore_numpy_generator,
            "loader_iter": _restore_loader_iterator,
            "position": _restore_position,
        }
    )
)


def _restore_attrs(
    attrs: dict[str, Any],
    saved: dict[str, Any],
    done: dict[int, Any],
    path: str,
    keep: frozenset[str],
) -> None:
    """Make an object's attributes what they were at the checkpoint: restored in place, or
    set where this process lacks them, and deleted where the checkpoint did not have them
    yet (a cache created lazily later)."""
    for name in [n for n in attrs if n not in saved and n not in keep]:
        del attrs[name]
    for name, child in saved.items():
        value = restore(attrs.get(name, _MISSING), child, done, f"{path}.{name}")
        if value is not _MISSING:  # a passive value (a function, a loader) this process lacks
            attrs[name] = value


def _new_instance(node: dict[str, Any], path: str, cur: Any) -> Any:
    """A blank instance of the checkpointed object's class, to fill with its attributes
    (what unpickling does), for an object this process does not have (yet)."""
    module, qualname = node.get("cls") or (None, None)
    cls: Any = sys.modules.get(module) if module else None
    for part in (qualname or "").split("."):
        cls = getattr(cls, part, None)
    if not isinstance(cls, type):
        what = f"a {qualname}" if qualname else "a plain object"
        found = "nothing" if cur is _MISSING or cur is UNBOUND else f"a {type(cur).__name__}"
        raise CannotRestore(path, what, f"this replay has {found} there to restore it into")
    return object.__new__(cls)


def _restore_tensor(cur: Any, node: dict[str, Any]) -> Any:
    saved: torch.Tensor = node["v"]
    if isinstance(cur, torch.Tensor):
        if node["k"] == "param" and cur.shape == saved.shape and cur.dtype == saved.dtype:
            with torch.no_grad():
                cur.copy_(saved)
            return cur
        saved = saved.to(cur.device)
    return saved.requires_grad_(node["grad"]) if saved.is_floating_point() else saved


def restore_rng(rng: dict[str, Any]) -> None:
    version, internal, gauss = rng["python"]
    if isinstance(internal, torch.Tensor):
        internal = internal.tolist()
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(rng["torch"])
    if "numpy" in rng:
        import numpy as np

        name, keys, pos, has_gauss, cached = rng["numpy"]
        np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
