"""The cheap part of a block's calling scope, saved with every checkpoint and rebound on restore.

Besides the state a block's ``SkipBlock.end`` carries, a checkpoint keeps the
small values that the scope calling it binds: Python scalars and strings,
small containers of them, numpy scalars, and small tensors and arrays. A
hindsight line that reads the last batch's ``loss`` after the block, or a loop
counter (``iter_num``) updated outside it, then sees the value a full run had,
without the user listing anything. Limits keep the cost small: a value over
``VALUE_BYTES`` is left out, and so is whatever does not fit in
``CHECKPOINT_VALUE_BYTES`` per checkpoint; a replay that needs a value the
checkpoint left out re-executes instead (``flor.replay.session``).
"""

from __future__ import annotations

import ctypes
import inspect
import sys
import types
from collections import OrderedDict
from typing import Any

import torch

from flor.runtime.state.unbound import UNBOUND

VALUE_BYTES = 1 << 20  # one value: the last batch of a small model fits
CHECKPOINT_VALUE_BYTES = 8 << 20  # all values of one checkpoint
_MAX_ITEMS = 10_000  # a longer list is history, not a value worth copying every checkpoint
_SCALARS = (type(None), bool, int, float, complex)


Frame = types.FrameType  # where SkipBlock.step_into / end was called


def visible_names(frame: Frame) -> dict[str, Any]:
    """The names ``frame`` sees: module globals too, for state a function's loop uses
    without binding it."""
    return {**frame.f_globals, **frame.f_locals}


def cheap_values(names: dict[str, Any]) -> dict[str, Any]:
    """The values in ``names`` worth saving, within the per-value and per-checkpoint limits."""
    chosen: dict[str, Any] = {}
    budget = CHECKPOINT_VALUE_BYTES
    for name, value in names.items():
        if name.startswith(("__", "_flor")) or value is UNBOUND:
            continue
        size = cost(value, VALUE_BYTES)
        if size is not None and size <= budget:
            chosen[name] = value
            budget -= size
    return chosen


def cost(value: Any, limit: int) -> int | None:
    """Bytes that saving ``value`` copies; ``None`` if it is not a cheap value or exceeds ``limit``."""
    t = type(value)
    if t in _SCALARS:
        return 8
    if t in (str, bytes):
        return len(value) if len(value) <= limit else None
    if isinstance(value, torch.Tensor):
        return _tensor_cost(value, limit)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.generic, np.ndarray)):
        if value.dtype.hasobject or value.nbytes > limit:
            return None
        return int(value.nbytes)
    if t in (list, tuple) and len(value) <= _MAX_ITEMS:
        return _items_cost(value, limit)
    if (
        t in (dict, OrderedDict)  # OrderedDict: a copy of a state_dict (the best weights)
        and len(value) <= _MAX_ITEMS
        and all(type(k) in (str, int) for k in value)
    ):
        return _items_cost(value.values(), limit)
    return None


def _tensor_cost(t: torch.Tensor, limit: int) -> int | None:
    if type(t) is not torch.Tensor or (t.is_leaf and t.requires_grad) or t.is_sparse:
        return None  # parameters are state, not values; subclasses may carry more than data
    size = t.numel() * t.element_size()
    return size if size <= limit else None


def _items_cost(items: Any, limit: int) -> int | None:
    total = 8
    for item in items:
        size = cost(item, limit - total)
        if size is None:
            return None
        total += size
        if total > limit:
            return None
    return total


def same(a: Any, b: Any) -> bool:
    """Whether rebinding ``a`` to ``b`` would change nothing a program could see (but identity)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return bool(
            a.shape == b.shape
            and a.dtype == b.dtype
            and a.device == b.device
            and a.requires_grad == b.requires_grad
            and torch.equal(a, b)
        )
    np = sys.modules.get("numpy")
    if np is not None and isinstance(a, np.ndarray):
        return bool(a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b))
    try:
        return bool(a == b)
    except Exception:  # containers of tensors: ambiguous truth values
        return False


def bind(frame: types.FrameType, values: dict[str, Any]) -> None:
    """Rebind names in ``frame``: a module's globals, or a running function's locals.

    Module and class bodies keep their names in a dict. A function's locals
    live in the frame: Python 3.13 writes through ``frame.f_locals`` (PEP 667);
    3.10-3.12 write the ``f_locals`` snapshot back with ``PyFrame_LocalsToFast``.
    """
    if not values:
        return
    if not frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        frame.f_locals.update(values)
    elif sys.version_info >= (3, 13):
        proxy = frame.f_locals
        for name, value in values.items():
            proxy[name] = value
    else:
        frame.f_locals.update(values)
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def unbound(frame: types.FrameType, names: frozenset[str]) -> list[str]:
    """Which of ``names`` ``frame`` cannot evaluate now (neither local nor global nor builtin)."""
    code, local, global_ = frame.f_code, frame.f_locals, frame.f_globals
    builtins = global_.get("__builtins__", {})
    builtins = builtins if isinstance(builtins, dict) else vars(builtins)
    fast = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
    optimized = bool(code.co_flags & inspect.CO_OPTIMIZED)

    def bound(name: str) -> bool:
        if optimized and name in fast:  # a local: globals do not count
            return name in local
        return name in local or name in global_ or name in builtins

    return [n for n in sorted(names) if not bound(n)]
