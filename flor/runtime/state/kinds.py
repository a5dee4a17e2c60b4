"""What kind of value a block's state holds, which decides how it is captured and restored.

Objects with ``state_dict``/``load_state_dict`` (modules, optimizers, schedulers,
GradScaler, EMA); loaders and samplers (only their position); trainable leaves and
private generators; plain objects (``self``); plain numpy arrays; read-only inputs and
sinks (datasets, files, modules, functions, loggers, progress bars), never touched. Also
what a state_dict leaves out but a full run has (train/eval flags, an optimizer's step flag).
"""

from __future__ import annotations

import enum
import functools
import io
import logging
import sys
import types
import weakref
from typing import Any

import torch

PRIMITIVE_TYPES = frozenset(
    {type(None), bool, int, float, str, bytes, torch.dtype, torch.device, torch.Size}
)


def primitive(x: Any) -> bool:
    """Saved as itself: exactly one of ``PRIMITIVE_TYPES``. A subclass (``numpy.float64`` is a
    float) is pickled instead: weights-only loading refuses any other class."""
    return type(x) in PRIMITIVE_TYPES


_SINK_NAMES = ("SummaryWriter", "tqdm", "Writer", "Run")  # by class name: optional packages


def is_passive(obj: Any) -> bool:
    """Read-only inputs and sinks: not state, never saved or touched."""
    return _passive_type(type(obj))  # type: ignore[arg-type]  # a class is hashable


@functools.cache
def _passive_type(t: Any) -> bool:  # a type (Any: functools.cache wants Hashable)
    if issubclass(
        t,
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
    return t.__name__ in _SINK_NAMES


_POSITIONED = (torch.utils.data.DataLoader, torch.utils.data.Sampler)


def positioned(obj: Any) -> bool:
    """A loader or sampler: its configuration and data are inputs, but iterating it may
    advance its counters and generators (accelerate's ``DataLoaderShard.iteration`` picks
    the next epoch's shuffle), which a full run has moved on and a replay must too."""
    return isinstance(obj, _POSITIONED)


def stateful(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def plain_object(obj: Any) -> bool:
    """An instance whose state is exactly its ``__dict__`` (no custom pickling)."""
    return hasattr(obj, "__dict__") and _plain_type(type(obj))


def _plain_type(t: Any) -> bool:
    return (
        not issubclass(t, (set, frozenset, dict))
        and t.__reduce_ex__ is object.__reduce_ex__
        and t.__reduce__ is object.__reduce__
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
        role = _role(type(value))  # type: ignore[arg-type]  # a class is hashable
        if _is_state(value, role):
            found[name] = value
        elif role is _Role.HOLDER and hasattr(value, "__dict__"):
            for attr, inner in vars(value).items():
                if _is_state(inner, _role(type(inner))):  # type: ignore[arg-type]
                    found[f"{name}.{attr}"] = inner
    return found


def _is_state(value: Any, role: _Role) -> bool:
    return role is _Role.STATE or (role is not _Role.NONE and _scoped_state(value))


class _Role(enum.Enum):
    """What a value's type alone says of it in a scope (a checkpoint asks of every name)."""

    NONE = 0  # never state: a module, a function, a class, a number, an array
    STATE = 1  # always state: a loader, a generator, a type with a state_dict
    INSTANCE = 2  # depends on the instance: a tensor (trainable?), an object with a __dict__
    HOLDER = 3  # that, and a plain object whose attributes may hold state (``self``)


@functools.cache
def _role(t: Any) -> _Role:
    if issubclass(t, (*_POSITIONED, torch.Generator)):
        return _Role.STATE
    if _passive_type(t):
        return _Role.NONE
    if issubclass(t, torch.Tensor):
        return _Role.INSTANCE
    if not t.__dictoffset__:  # no instance attributes: the type decides
        return _Role.STATE if stateful(t) else _Role.NONE  # the class's own methods
    return _Role.HOLDER if _plain_type(t) else _Role.INSTANCE


def _scoped_state(value: Any) -> bool:
    has_state = stateful(value) and not is_passive(value)
    return has_state or positioned(value) or _trainable(value) or is_generator(value)


def is_generator(value: Any) -> bool:
    """A torch generator (a private one, ``torch.Generator()``, is state even where no block
    names it). Not ``isinstance``: the metaclass of ``torch.Generator`` answers it
    in Python, a microsecond for each value a checkpoint walks."""
    return issubclass(type(value), torch.Generator)


def _trainable(value: Any) -> bool:
    """A leaf tensor an optimizer updates in place (``nn.Parameter``, ``requires_grad=True``)."""
    return isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad


def numeric_array(obj: Any) -> bool:
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


def numeric_scalar(obj: Any) -> bool:
    """A numpy number (``np.float64``: a mean of returns): saved as its bytes and dtype."""
    np = sys.modules.get("numpy")
    return (
        np is not None
        and isinstance(obj, np.generic)
        and type(obj) is obj.dtype.type
        and obj.dtype.kind in "biufc"
    )


NUMPY_BIT_GENERATORS = frozenset({"PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"})


def numpy_generator(obj: Any) -> bool:
    """A numpy ``Generator`` (an environment's ``np_random``) over one of numpy's bit
    generators, seeded by a ``SeedSequence`` of integers: saved as its state and seed, which
    is what a pickle of it holds, in a tenth of the time."""
    np = sys.modules.get("numpy")
    if np is None or type(obj) is not np.random.Generator:
        return False
    bitgen = obj.bit_generator
    seq = bitgen.seed_seq
    entropy: Any = seq.entropy if type(seq) is np.random.SeedSequence else None
    return type(bitgen).__name__ in NUMPY_BIT_GENERATORS and (
        type(entropy) is int
        or (type(entropy) in (list, tuple) and all(type(e) is int for e in entropy))
    )


def numpy_seed(seq: Any) -> list[Any]:
    """What a numpy ``SeedSequence`` is made of: entropy, spawn key, pool size, spawn count."""
    entropy = seq.entropy if type(seq.entropy) is int else list(seq.entropy)
    return [entropy, list(seq.spawn_key), seq.pool_size, seq.n_children_spawned]


MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))
_WEAK = (weakref.ReferenceType, weakref.ProxyType, weakref.CallableProxyType)


def module_attrs(module: torch.nn.Module) -> dict[str, Any]:
    """What a module holds besides parameters, buffers, submodules and its own caches of
    them: an optimizer built in ``__init__`` (``self.optimizer``), a rollout list
    (``self.data``), counters. Its ``state_dict`` leaves them out; a full run has them."""
    if is_wrapper(module):
        return {}
    attrs, derived = _own_attrs(module)
    for name in derived:
        del attrs[name]
    return attrs


def kept_attrs(module: torch.nn.Module) -> frozenset[str]:
    """The attributes a checkpoint neither saves nor takes away: torch's own, a framework
    base class's, and the caches ``_derived`` finds."""
    internals = _internals(type(module))  # type: ignore[arg-type]  # a class is hashable
    derived = _own_attrs(module)[1]
    return internals.union(derived) if derived else internals


def _own_attrs(module: torch.nn.Module) -> tuple[dict[str, Any], list[str]]:
    """A module's attributes but torch's and its framework's own, and which of them are
    caches of its parameters (``_derived``)."""
    internals = _internals(type(module))  # type: ignore[arg-type]  # a class is hashable
    attrs = {k: v for k, v in vars(module).items() if k not in internals}
    return attrs, _derived(module, attrs) if attrs else []


@functools.cache
def _internals(t: Any) -> frozenset[str]:  # a type (Any: functools.cache wants Hashable)
    """What the constructor of ``t``'s framework base sets up (a LightningModule's trainer,
    its logging state): built in this process by the framework, like torch's own."""
    for base in t.__mro__:
        if base.__name__ == "LightningModule" and base.__module__.endswith(".core.module"):
            return MODULE_INTERNALS.union(vars(base()))
    return MODULE_INTERNALS


def _derived(module: torch.nn.Module, attrs: dict[str, Any]) -> list[str]:
    """Caches of a module's own parameters, valid again as those are restored in place: an
    RNN's ``_flat_weights`` and the weak references to them (unpicklable; torch keeps them)."""
    own: set[int] | None = None
    found = []
    for name, value in attrs.items():
        if isinstance(value, _WEAK):
            found.append(name)
        elif type(value) in (list, tuple) and value:
            if own is None:
                own = {id(t) for t in (*module._parameters.values(), *module._buffers.values())}
            if all(v is None or isinstance(v, _WEAK) or id(v) in own for v in value):
                found.append(name)
    return found


def is_wrapper(module: torch.nn.Module) -> bool:
    """A wrapper's own attributes are built by its constructor, in this process, and never
    restored (its wrapped module's are): DDP's reducer, logger and process group;
    ``torch.compile``'s compiler context and wrapped forward."""
    if isinstance(module, torch.nn.parallel.DistributedDataParallel):
        return True
    dynamo = sys.modules.get("torch._dynamo.eval_frame")  # imported by torch.compile
    return dynamo is not None and isinstance(module, dynamo.OptimizedModule)


def flags(obj: Any) -> dict[str, Any]:
    """What a state_dict leaves out but a full run would have after the block:
    train/eval mode of every submodule, and whether an optimizer has stepped
    (without it, torch warns that the scheduler stepped first)."""
    if isinstance(obj, torch.nn.Module):
        return {"training": [m.training for m in obj.modules()]}
    stepped = _innermost(obj)
    if hasattr(stepped, "_opt_called"):
        return {"_opt_called": bool(stepped._opt_called)}
    return {}


def set_flags(obj: Any, flags: dict[str, Any]) -> None:
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
