"""Capture a block's state in memory: a tree of plain dicts, lists, tensors and primitives.

A snapshot serializes with ``torch.save`` and loads with weights-only loading (``codec``);
``restore`` is its inverse, and its docstring says how each kind of value comes back.
Values that fit no kind (``kinds``) are pickled; ``codec`` unpickles them only after the
checkpoint's checksum matched its journal entry.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import pickle
import random
import sys
import threading
import types
from collections import OrderedDict
from typing import Any

import torch

from flor.runtime.state import loader_position
from flor.runtime.state.chunks import Pack, compare, memory
from flor.runtime.state.codec import BLOB_MIN_BYTES, LargeBytes, packed_copy
from flor.runtime.state.kinds import (
    PRIMITIVE_TYPES,
    flags,
    is_generator,
    is_passive,
    module_attrs,
    numeric_array,
    numeric_scalar,
    numpy_generator,
    numpy_seed,
    plain_object,
    positioned,
    primitive,
    stateful,
)
from flor.runtime.state.unbound import UNBOUND


class Unrestorable(Exception):
    """A value that cannot be checkpointed (a generator, a lock, ...)."""


def tensor_copy(t: torch.Tensor) -> torch.Tensor:
    """A detached CPU copy (the training thread's only real work per checkpoint)."""
    t = t.detach()
    return t.to("cpu", copy=True) if t.device.type != "cpu" else t.clone()


class Snapshot:
    """One checkpoint being taken: the objects seen so far (an object shared by two
    names is saved once), and the bytes of tensor data copied (what bounds the writer).

    ``previous`` holds the copies the last snapshot of the same block made, by source
    (address, dtype, shape; a gradient by its parameter's address): a large tensor whose
    bits still equal its copy's is not copied again but shares that copy, whose chunks are
    stored already. The compare reads every byte, so a write that bypassed autograd's
    version counter (``.data``, a numpy view) is seen; a tensor whose counter moved was
    written to, and is copied without one (an optimizer's parameters and moments, every
    step). A copy remembers the chunks it compared equal (``_flor_same``) for its writer.
    """

    def __init__(
        self, previous: dict[tuple[Any, ...], torch.Tensor] | None = None, pack: Pack | None = None
    ) -> None:
        self.seen: dict[int, int] = {}
        self.nbytes = 0
        self.previous = previous
        self.pack = pack  # where small tensors are copied to as bytes, if given (``packed_copy``)
        self.current: dict[tuple[Any, ...], torch.Tensor] = {}

    def copy(self, t: torch.Tensor, of: torch.Tensor | None = None) -> torch.Tensor:
        """A copy of ``t``, or the previous one where its bits are equal. ``of``: the parameter
        whose gradient ``t`` is, the gradient's source across steps (``zero_grad`` frees it,
        and backward allocates the next one wherever it may)."""
        nbytes = t.nbytes
        if nbytes < BLOB_MIN_BYTES and self.pack is not None:
            piece = packed_copy(t, nbytes, self.pack)
            if piece is not None:
                self.nbytes += nbytes
                return piece  # type: ignore[return-value]  # a tensor as its encoded form
        if self.previous is None or nbytes < BLOB_MIN_BYTES or not _comparable(t):
            self.nbytes += nbytes
            return tensor_copy(t)
        t = t.detach()
        owner = t if of is None else of
        source = (owner.data_ptr(), t.dtype, tuple(t.shape), of is not None)
        prev = self.previous.get(source)
        version = _version(t)
        same = None
        if prev is not None and version == getattr(prev, "_flor_version", None):
            same = compare(prev, memory(t))  # an equal counter proves nothing
            if same is not None and all(same):
                self.current[source] = prev
                return prev
        self.nbytes += nbytes
        new = t.clone()
        new._flor_version = version  # type: ignore[attr-defined]
        if prev is not None:  # its writer keeps the hashes of the chunks that are equal
            prev.__dict__.pop("_flor_prev", None)  # a chain would hold every old copy
            new._flor_prev = prev  # type: ignore[attr-defined]
            if same is not None:
                new._flor_same = same  # type: ignore[attr-defined]  # compared already
        self.current[source] = new
        return new


def _version(t: torch.Tensor) -> int | None:
    """Autograd's count of in-place writes to ``t`` (None where torch keeps none). A
    changed count means a write; an equal one proves nothing (``.data``, numpy views)."""
    try:
        return int(t._version)
    except RuntimeError:  # an inference-mode tensor
        return None


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
    if primitive(x):
        return x
    if type(x) is dict:  # an optimizer's state per parameter (no ``_metadata``: not an object)
        return {k: clone_tree(v, snap) for k, v in x.items()}
    if type(x) is list and PRIMITIVE_TYPES.issuperset(map(type, x)):
        return list(x)  # an optimizer's parameter ids: no call per item
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


_SCALARS = frozenset({float, int, bool, str, type(None)})
_LONG = 1024


def _values(items: list[Any] | tuple[Any, ...]) -> Any:
    """Primitives as they are; a long list of scalars pickled, and so stored as chunks once
    large: a growing history shares the chunks of its unchanged prefix with the checkpoint
    before (``codec`` unpickles it, after its checksum matched)."""
    if len(items) >= _LONG and _SCALARS.issuperset(map(type, items)):
        return {"__flor_pickle__": _pickle(list(items))}
    return list(items)


def _pickle(x: Any) -> bytes:
    try:
        data = pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        raise Unrestorable(f"a {type(x).__name__}, which cannot be saved ({_reason(e)})") from None
    return LargeBytes(data) if len(data) >= BLOB_MIN_BYTES else data  # stored as chunks


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
    if primitive(obj):
        return {"k": "val", "v": obj}
    if id(obj) in memo:
        return {"k": "ref", "v": memo[id(obj)]}
    if is_passive(obj):
        return {"k": "passive"}
    if isinstance(obj, (types.GeneratorType, type(threading.Lock()))):
        raise Unrestorable(f"a {type(obj).__name__}, which cannot be checkpointed")
    memo[id(obj)] = len(memo)
    node = _capture_new(obj, snap)
    node["id"] = memo[id(obj)]
    return node


def _capture_new(obj: Any, snap: Snapshot) -> dict[str, Any]:
    if positioned(obj):
        return _capture_position(obj, snap)
    if is_generator(obj):
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
    if isinstance(obj, torch.nn.Module):
        return _capture_module(obj, snap)
    if stateful(obj):
        return {"k": "sd", "v": clone_tree(obj.state_dict(), snap), "flags": flags(obj)}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        if PRIMITIVE_TYPES.issuperset(map(type, obj)):  # a history of losses: as it is
            return {"k": kind, "vals": _values(obj)}  # (not a node per item: 0.5 us each)
        return {"k": kind, "v": [capture(v, snap) for v in obj]}
    if isinstance(obj, dict) and all(primitive(k) for k in obj):
        node = {"k": "dict", "keys": list(obj), "v": [capture(v, snap) for v in obj.values()]}
        if isinstance(obj, OrderedDict):  # a state_dict's copy: its versions matter to loading
            node["ordered"] = True
            meta = getattr(obj, "_metadata", None)
            if isinstance(meta, dict):
                node["meta"] = capture(meta, snap)
        return node
    if numeric_array(obj):
        return _capture_array(obj, snap)
    if numeric_scalar(obj):
        return {"k": "npscalar", "dtype": obj.dtype.str, "v": obj.tobytes()}
    if numpy_generator(obj):
        return _capture_numpy_generator(obj, snap)
    if not plain_object(obj):
        return {"k": "pickle", "v": _pickle(obj)}
    attrs = vars(obj)
    return {
        "k": "obj",
        "v": {name: capture(v, snap) for name, v in attrs.items()},
        "cls": [type(obj).__module__, type(obj).__qualname__],
    }


def _capture_module(module: torch.nn.Module, snap: Snapshot) -> dict[str, Any]:
    """Its state_dict, and what that leaves out but a full run has: each submodule's train
    flag and other attributes, and the gradients (hindsight logs read them)."""
    modules = list(module.modules())
    return {
        "k": "sd",
        "v": clone_tree(module.state_dict(), snap),
        "flags": {"training": [m.training for m in modules]},  # as ``kinds.flags``
        "grads": [None if p.grad is None else snap.copy(p.grad, of=p) for p in module.parameters()],
        "attrs": [{name: capture(v, snap) for name, v in module_attrs(m).items()} for m in modules],
    }


def _capture_numpy_generator(gen: Any, snap: Snapshot) -> dict[str, Any]:
    """Its bit generator's state (numbers; small arrays for some) and its seed sequence."""
    bitgen = gen.bit_generator
    return {
        "k": "npgen",
        "bitgen": type(bitgen).__name__,
        "state": clone_tree(bitgen.state, snap),
        "seed": numpy_seed(bitgen.seed_seq),
    }


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


_COUNTERS = (bool, int, float)


def _capture_position(obj: Any, snap: Snapshot) -> dict[str, Any]:
    """A loader's or sampler's counters, and the generators, samplers and loaders it holds
    (shared ones once: a loader and its sampler often hold the same generator)."""
    numbers, parts = {}, {}
    settings = _settings(type(obj))  # type: ignore[arg-type]  # a class is hashable
    for name, value in getattr(obj, "__dict__", {}).items():
        if type(value) in _COUNTERS and name not in settings:
            numbers[name] = value
        elif positioned(value) or is_generator(value):
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


def capture_rng() -> dict[str, Any]:
    """Every global RNG stream: python, numpy (if imported), torch CPU, each CUDA device."""
    return GlobalRng().read()


class GlobalRng:
    """Reads the global RNG streams for one block's checkpoints, one after another. Python's
    state, unchanged since the last read (a script that draws from torch alone), reuses that
    read's conversion to one tensor. (numpy's legacy state is read each time: its cached
    Gaussian, which ``set_state`` can put back without moving a word, is not seen otherwise.)"""

    def __init__(self) -> None:
        self._python: tuple[tuple[int, ...], torch.Tensor] | None = None

    def read(self) -> dict[str, Any]:
        version, internal, gauss = random.getstate()
        np = sys.modules.get("numpy")
        if self._python is None or self._python[0] != internal:
            # 625 ints as one tensor: pickled one by one, they were a checkpoint's largest
            # fixed cost (and numpy converts them in a third of torch.tensor's time)
            self._python = (internal, _int64s(internal, np))
        rng: dict[str, Any] = {
            "python": [version, self._python[1], gauss],
            "torch": torch.get_rng_state(),
        }
        if np is not None:
            name, keys, pos, has_gauss, cached = np.random.get_state()
            # its uint32 keys as int32 (restore casts them back): torch has no uint32 to pickle
            rng["numpy"] = [name, torch.from_numpy(keys.view(np.int32)), pos, has_gauss, cached]
        if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            rng["cuda"] = torch.cuda.get_rng_state_all()
        return rng


def _int64s(values: tuple[int, ...], np: Any) -> torch.Tensor:
    if np is None:
        return torch.tensor(values, dtype=torch.int64)
    return torch.from_numpy(np.array(values, dtype=np.int64))
