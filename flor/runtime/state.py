"""Capture a block's state in memory, and restore it in place.

A snapshot is a tree of plain dicts, lists, tensors and primitives, so it
serializes with ``torch.save`` and loads with weights-only loading. Restoring
returns the object the caller's name should be bound to afterwards:

- objects with ``state_dict``/``load_state_dict`` (modules, optimizers,
  schedulers, GradScaler, EMA) are loaded in place, so aliases stay valid;
- containers (list, dict, set) and plain objects (``self``) are refilled in
  place, their items and attributes restored recursively;
- parameters and other grad-requiring leaves are copied into in place;
- other tensors and values are rebound to the recorded value;
- a DataLoader or sampler keeps only its position: the counters it advances as
  it is iterated (accelerate's epoch count, a sampler's ``epoch``) and the
  generators it draws from, restored in place; its dataset is never saved;
- read-only inputs and sinks (datasets, files, modules, functions, loggers,
  progress bars) are neither saved nor touched.

Values that fit none of these are pickled; ``codec`` unpickles them only after
the checkpoint's checksum matched its journal entry.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import logging
import pickle
import random
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import torch

from flor.errors import FlorError
from flor.runtime import loader_position
from flor.runtime.chunks import as_words
from flor.runtime.codec import BLOB_MIN_BYTES  # smaller tensors are inlined, not chunked
from flor.runtime.unbound import UNBOUND

_MISSING = object()
_PRIMITIVES = (type(None), bool, int, float, str, bytes, torch.dtype, torch.device, torch.Size)


def _primitive(x: Any) -> bool:
    """Saved as itself: exactly one of ``_PRIMITIVES``. A subclass (``numpy.float64`` is a
    float) is pickled instead: weights-only loading refuses any other class."""
    return type(x) in _PRIMITIVES


_SINK_NAMES = ("SummaryWriter", "tqdm", "Writer", "Run")  # by class name: optional packages


class Unrestorable(Exception):
    """A value that cannot be checkpointed (a generator, a lock, ...)."""


def _is_passive(obj: Any) -> bool:
    """Read-only inputs and sinks: not state, never saved or touched."""
    if isinstance(
        obj,
        (
            types.ModuleType,
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            type,
            io.IOBase,
            logging.Logger,
            torch.utils.data.Dataset,
        ),
    ):
        return True
    return type(obj).__name__ in _SINK_NAMES


def _positioned(obj: Any) -> bool:
    """A loader or sampler: its configuration and data are inputs, but iterating it may
    advance its counters and generators (accelerate's ``DataLoaderShard.iteration`` picks
    the next epoch's shuffle), which a full run has moved on and a replay must too."""
    return isinstance(obj, (torch.utils.data.DataLoader, torch.utils.data.Sampler))


def _stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def _plain_object(obj: Any) -> bool:
    """An instance whose state is exactly its ``__dict__`` (no custom pickling)."""
    t = type(obj)
    return (
        hasattr(obj, "__dict__")
        and not isinstance(obj, (set, frozenset, dict))
        and t.__reduce_ex__ is object.__reduce_ex__  # type: ignore[comparison-overlap]
        and t.__reduce__ is object.__reduce__  # type: ignore[comparison-overlap]
        and getattr(t, "__getstate__", object.__getstate__) is object.__getstate__
    )


def stateful_in_scope(names: dict[str, Any]) -> dict[str, Any]:
    """Objects with a state_dict (and trainable tensors) bound in a scope, and on the
    plain objects there (``self``).

    ``SkipBlock.end`` checkpoints these besides what it is given: a scheduler
    stepped after the block, or an EMA the annotation forgot, is then still
    restored. Restoring more is always safe: it is the full run's value at that point.
    """
    found = {}
    for name, value in names.items():
        if name.startswith("__"):
            continue
        if _scoped_state(value):
            found[name] = value
        elif _plain_object(value) and not _is_passive(value):
            for attr, inner in vars(value).items():
                if _scoped_state(inner):
                    found[f"{name}.{attr}"] = inner
    return found


def _scoped_state(value: Any) -> bool:
    stateful = _stateful(value) and not _is_passive(value)
    return stateful or _positioned(value) or _trainable(value) or _generator(value)


def _generator(value: Any) -> bool:
    """A private torch generator (``torch.Generator()``): state, even where no block names it."""
    return isinstance(value, torch.Generator)


def _trainable(value: Any) -> bool:
    """A leaf tensor an optimizer updates in place (``nn.Parameter``, ``requires_grad=True``)."""
    return isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad


def tensor_copy(t: torch.Tensor) -> torch.Tensor:
    """A detached CPU copy (the training thread's only real work per checkpoint)."""
    t = t.detach()
    return t.to("cpu", copy=True) if t.device.type != "cpu" else t.clone()


class Snapshot:
    """One checkpoint being taken: the objects seen so far (an object shared by two
    names is saved once), and the bytes of tensor data copied (what bounds the writer).

    ``previous`` holds the copies the last snapshot of the same block made, by source
    (address, dtype, shape): a large tensor whose bits still equal its copy's is not
    copied again but shares that copy, whose chunks are stored already. The compare
    reads every byte, so a write that bypassed autograd's version counter (``.data``,
    a numpy view) is seen.
    """

    def __init__(self, previous: dict[tuple[Any, ...], torch.Tensor] | None = None) -> None:
        self.seen: dict[int, int] = {}
        self.nbytes = 0
        self.previous = previous
        self.current: dict[tuple[Any, ...], torch.Tensor] = {}

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        nbytes = t.numel() * t.element_size()
        if self.previous is None or nbytes < BLOB_MIN_BYTES or not _comparable(t):
            self.nbytes += nbytes
            return tensor_copy(t)
        t = t.detach()
        source = (t.data_ptr(), t.dtype, tuple(t.shape))
        prev = self.previous.get(source)
        if prev is not None and torch.equal(as_words(prev), as_words(t)):
            self.current[source] = prev
            return prev
        self.nbytes += nbytes
        new = t.clone()
        if prev is not None:  # its writer compares chunks with this one's: most may be equal
            prev.__dict__.pop("_flor_prev", None)  # a chain would hold every old copy
            new._flor_prev = prev  # type: ignore[attr-defined]
        self.current[source] = new
        return new


def _comparable(t: torch.Tensor) -> bool:
    return (
        t.device.type == "cpu"
        and t.layout == torch.strided
        and not t.is_quantized
        and t.is_contiguous()
    )


def clone_tree(x: Any, snap: Snapshot) -> Any:
    """Deep copy of a state_dict-like tree: tensors copied, opaque leaves pickled."""
    if isinstance(x, torch.Tensor):
        return snap.copy(x)
    if _primitive(x):
        return x
    if isinstance(x, dict):
        out: dict[Any, Any] = OrderedDict() if isinstance(x, OrderedDict) else {}
        for k, v in x.items():
            out[k] = clone_tree(v, snap)
        if hasattr(x, "_metadata"):
            out._metadata = x._metadata  # type: ignore[attr-defined]
        return out
    if isinstance(x, list):
        return [clone_tree(v, snap) for v in x]
    if isinstance(x, tuple):
        return tuple(clone_tree(v, snap) for v in x)
    return {"__flor_pickle__": _pickle(x)}


def _pickle(x: Any) -> bytes:
    try:
        return pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        raise Unrestorable(f"a {type(x).__name__}, which cannot be saved ({_reason(e)})") from None


def _reason(e: Exception) -> str:
    """An exception's message; torch raises some with a format and its arguments unjoined
    (``NotImplementedError('{} cannot be pickled', '_SingleProcessDataLoaderIter')``)."""
    head, *rest = e.args or ("",)
    if isinstance(head, str) and rest and head.count("{}") == len(rest):
        return head.format(*rest)
    return str(e)


def capture(obj: Any, snap: Snapshot | None = None) -> dict[str, Any]:
    """Snapshot ``obj``; shared objects are captured once and referenced after."""
    snap = Snapshot() if snap is None else snap
    memo = snap.seen
    if obj is UNBOUND:
        return {"k": "unbound"}
    if _primitive(obj):
        return {"k": "val", "v": obj}
    if id(obj) in memo:
        return {"k": "ref", "v": memo[id(obj)]}
    if _is_passive(obj):
        return {"k": "passive"}
    if isinstance(obj, (types.GeneratorType, type(threading.Lock()))):
        raise Unrestorable(f"a {type(obj).__name__}, which cannot be checkpointed")
    memo[id(obj)] = len(memo)
    node = _capture_new(obj, snap)
    node["id"] = memo[id(obj)]
    return node


def _capture_new(obj: Any, snap: Snapshot) -> dict[str, Any]:
    if _positioned(obj):
        return _capture_position(obj, snap)
    if isinstance(obj, torch.Generator):
        return {"k": "gen", "v": obj.get_state(), "device": str(obj.device)}
    if isinstance(obj, torch.Tensor):
        in_place = isinstance(obj, torch.nn.Parameter) or (obj.is_leaf and obj.requires_grad)
        return {
            "k": "param" if in_place else "tensor",
            "v": snap.copy(obj),
            "grad": obj.requires_grad,
        }
    if loader_position.is_loader_iterator(obj):
        try:
            node = loader_position.capture(obj)
        except ValueError as e:
            raise Unrestorable(str(e)) from None
        if "state" in node:  # the iterator's own state_dict: copied, as it is written later
            node["state"] = clone_tree(node["state"], snap)
        return node
    if type(obj).__module__.startswith("torch.distributed.fsdp"):
        raise Unrestorable(f"a {type(obj).__name__}, whose state is sharded across ranks")
    if _stateful(obj):
        node = {"k": "sd", "v": clone_tree(obj.state_dict(), snap), "flags": _flags(obj)}
        if isinstance(obj, torch.nn.Module):  # hindsight logs read gradients: a full run has them
            node["grads"] = [
                None if p.grad is None else snap.copy(p.grad) for p in obj.parameters()
            ]
            node["attrs"] = [
                {name: capture(v, snap) for name, v in _module_attrs(m).items()}
                for m in obj.modules()
            ]
        return node
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {"k": kind, "v": [capture(v, snap) for v in obj]}
    if isinstance(obj, dict) and all(_primitive(k) for k in obj):
        node = {"k": "dict", "keys": list(obj), "v": [capture(v, snap) for v in obj.values()]}
        if isinstance(obj, OrderedDict):  # a state_dict's copy: its versions matter to loading
            node["ordered"] = True
            meta = getattr(obj, "_metadata", None)
            if isinstance(meta, dict):
                node["meta"] = capture(meta, snap)
        return node
    if _numeric_array(obj):
        return _capture_array(obj, snap)
    if not _plain_object(obj):
        return {"k": "pickle", "v": _pickle(obj)}
    attrs = vars(obj)
    return {
        "k": "obj",
        "v": {name: capture(v, snap) for name, v in attrs.items()},
        "cls": [type(obj).__module__, type(obj).__qualname__],
    }


def _numeric_array(obj: Any) -> bool:
    """A plain numpy array of numbers (a replay buffer's, a dataset's): saved as its bytes,
    so that a checkpoint stores only the chunks that changed (a subclass, a record or an
    object array is pickled)."""
    np = sys.modules.get("numpy")
    return (
        np is not None
        and type(obj) is np.ndarray
        and obj.dtype.kind in "biufc"
        and obj.dtype.fields is None
    )


def _capture_array(a: Any, snap: Snapshot) -> dict[str, Any]:
    """Its bytes in C order (or F order for an F-ordered array: its strides survive)."""
    fortran = a.flags.f_contiguous and not a.flags.c_contiguous
    flat = (a.T if fortran else a).reshape(-1)  # a copy only when a is neither
    if not flat.flags.c_contiguous or not flat.flags.writeable:
        flat = flat.copy()  # torch.from_numpy warns on a read-only array
    data = torch.from_numpy(flat.view("u1")) if flat.size else torch.empty(0, dtype=torch.uint8)
    return {
        "k": "ndarray",
        "v": snap.copy(data),
        "dtype": a.dtype.str,
        "shape": list(a.shape),
        "fortran": fortran,
    }


def _restore_array(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    """A new array, like an unpickled one: the name is rebound, as for any other value."""
    import numpy as np

    raw: torch.Tensor = node["v"]
    shape = node["shape"]
    flat = raw.numpy().view(np.dtype(node["dtype"])).copy()
    if node["fortran"]:
        return flat.reshape(shape[::-1]).T
    return flat.reshape(shape)


_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
_COUNTERS = (bool, int, float)


def _capture_position(obj: Any, snap: Snapshot) -> dict[str, Any]:
    """A loader's or sampler's counters, and the generators, samplers and loaders it holds
    (shared ones once: a loader and its sampler often hold the same generator)."""
    numbers, parts = {}, {}
    settings = _settings(type(obj))  # type: ignore[arg-type]  # a class is hashable
    for name, value in getattr(obj, "__dict__", {}).items():
        if type(value) in _COUNTERS and name not in settings:
            numbers[name] = value
        elif _positioned(value) or isinstance(value, torch.Generator):
            parts[name] = capture(value, snap)
    return {"k": "position", "v": numbers, "parts": parts}


@functools.cache
def _settings(cls: Any) -> frozenset[str]:
    """What its constructors are told (``batch_size``, ``num_workers``, ``seed``): the script's
    settings, which an edit may change, not a position the object advances itself."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if callable(init):
            with contextlib.suppress(TypeError, ValueError):  # a builtin's: no signature
                names.update(inspect.signature(init).parameters)
    return frozenset(names)


def _module_attrs(module: torch.nn.Module) -> dict[str, Any]:
    """What a module holds besides parameters, buffers and submodules: an optimizer built
    in ``__init__`` (``self.optimizer``), a rollout list (``self.data``), counters. Its
    ``state_dict`` leaves them out; a full run has them."""
    if _is_ddp(module):
        return {}
    return {k: v for k, v in vars(module).items() if k not in _MODULE_INTERNALS}


def _is_ddp(module: torch.nn.Module) -> bool:
    """A DDP wrapper's own attributes are its reducer, logger and process group: built by
    its constructor, in this process, never restored (its wrapped module's are)."""
    return isinstance(module, torch.nn.parallel.DistributedDataParallel)


def _flags(obj: Any) -> dict[str, Any]:
    """What a state_dict leaves out but a full run would have after the block:
    train/eval mode of every submodule, and whether an optimizer has stepped
    (without it, torch warns that the scheduler stepped first)."""
    if isinstance(obj, torch.nn.Module):
        return {"training": [m.training for m in obj.modules()]}
    stepped = _innermost(obj)
    if hasattr(stepped, "_opt_called"):
        return {"_opt_called": bool(stepped._opt_called)}
    return {}


def _set_flags(obj: Any, flags: dict[str, Any]) -> None:
    if "training" in flags and isinstance(obj, torch.nn.Module):
        for module, training in zip(obj.modules(), flags["training"]):
            module.training = training
    if "_opt_called" in flags:
        _innermost(obj)._opt_called = flags["_opt_called"]


def _innermost(obj: Any) -> Any:
    """The optimizer a wrapper steps (accelerate's ``AcceleratedOptimizer.optimizer``): the
    one a scheduler built before ``prepare`` watches."""
    while isinstance(obj, torch.optim.Optimizer):
        inner = getattr(obj, "optimizer", None)
        if not isinstance(inner, torch.optim.Optimizer):
            break
        obj = inner
    return obj


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
    if not _stateful(cur):
        raise CannotRestore(
            path,
            "an object with a state_dict",
            "this replay has no such object where the block ends (it is created inside the "
            "block, or the edit removed it)",
        )
    cur.load_state_dict(node["v"])
    _set_flags(cur, node.get("flags", {}))
    if "grads" in node:
        for param, grad in zip(cur.parameters(), node["grads"]):
            param.grad = None if grad is None else grad.to(param.device)
    if "attrs" in node and isinstance(cur, torch.nn.Module):
        for i, (module, attrs) in enumerate(zip(cur.modules(), node["attrs"])):
            where = path if i == 0 else f"{path}.<submodule {i}>"
            if not _is_ddp(module):
                _restore_attrs(vars(module), attrs, done, where, _MODULE_INTERNALS)
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
    if cur is _MISSING or cur is UNBOUND or not _plain_object(cur):
        cur = _new_instance(node, path, cur)
    done[node["id"]] = cur
    _restore_attrs(vars(cur), node["v"], done, path, frozenset())
    return cur


def _restore_pickled(cur: Any, node: dict[str, Any], done: dict[int, Any], path: str) -> Any:
    new = pickle.loads(node["v"])
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
    if not _positioned(cur):
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


def capture_rng() -> dict[str, Any]:
    """Every global RNG stream: python, numpy (if imported), torch CPU, each CUDA device."""
    version, internal, gauss = random.getstate()
    rng: dict[str, Any] = {
        # 625 ints as one tensor: pickling them one by one was a checkpoint's largest fixed cost
        "python": [version, torch.tensor(internal, dtype=torch.int64), gauss],
        "torch": torch.get_rng_state(),
    }
    np = sys.modules.get("numpy")
    if np is not None:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        rng["numpy"] = [name, torch.from_numpy(keys.astype("int64")), pos, has_gauss, cached]
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


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
