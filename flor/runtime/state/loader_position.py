"""A persistent DataLoader iterator's position, checkpointed without its data.

``data_iter = iter(loader)`` advanced with ``next()`` inside the loop (an
``InfiniteDataLoader`` around ``RandomSampler(replacement=True, ...)``) holds
its position in a generator, which cannot be saved. What decides that
position is small: the random state its sampler drew from when the iterator
produced its first batch (a ``RandomSampler`` seeds itself then, from the
global torch generator or its own), and how many batches it has produced. So
flor notes the random state at each iterator's first batch (``install``
wraps ``_next_index`` of torch's single-process iterator), saves that and the
count, and on restore re-creates the index stream from that state and
fast-forwards it by the count: indices only, no data is loaded.

An iterator of torchdata's ``StatefulDataLoader`` says where it is itself
(``state_dict``), with worker processes too: that state is saved instead, and
restoring re-initialises this process's iterator from it, in place, so the
script's names and the loader keep referring to the same object.

Other iterators with worker processes (``num_workers > 0``) prefetch in
other processes: their position cannot be captured, and the error names the
iterator and where it was created.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

import torch
from torch.utils.data import dataloader

_Iter = dataloader._BaseDataLoaderIter


def install() -> None:
    """Note each DataLoader iterator's loader and creation site, and the random state at its
    first batch (once per process)."""
    if getattr(_Iter._next_index, "_flor", False):
        return
    original: Any = _Iter._next_index  # untyped in torch
    original_init: Any = _Iter.__init__

    def _next_index(self: Any) -> Any:
        if self._num_yielded == 0:
            self._flor_start = _random_state(self)
        return original(self)

    def __init__(self: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, loader, *args, **kwargs)
        self._flor_loader = weakref.ref(loader)
        self._flor_origin = _caller()

    _next_index._flor = True  # type: ignore[attr-defined]
    _Iter._next_index = _next_index  # type: ignore[method-assign]
    _Iter.__init__ = __init__  # type: ignore[method-assign]


_LIBRARIES = (os.path.dirname(torch.__file__), f"{os.sep}torchdata{os.sep}")


def _caller() -> str | None:
    """The first frame outside torch and torchdata: where the script created the iterator."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not any(lib in path for lib in _LIBRARIES) and not path.startswith("<"):
            return f"{os.path.basename(path)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def is_loader_iterator(obj: Any) -> bool:
    return isinstance(obj, _Iter)


def _speaks_state(it: Any) -> bool:
    """An iterator of torchdata's StatefulDataLoader, which saves and resumes its position
    (re-initialised from a state by ``__init__(loader, state)``), created under flor."""
    return (
        type(it).__module__.startswith("torchdata.")
        and callable(getattr(it, "state_dict", None))
        and getattr(it, "_flor_loader", None) is not None
    )


def capture(it: Any) -> dict[str, Any]:
    """The node that restores ``it``'s position; ``ValueError`` saying why it cannot."""
    if _speaks_state(it):
        return {"k": "loader_iter", "state": it.state_dict()}
    if not isinstance(it, dataloader._SingleProcessDataLoaderIter):
        where = getattr(it, "_flor_origin", None)
        created = f", created at {where}" if where else ""
        raise ValueError(
            f"a DataLoader iterator with worker processes (num_workers={it._num_workers}"
            f"{created}), whose position lives in those processes; use num_workers=0 or "
            "torchdata's StatefulDataLoader to make it restorable"
        )
    if it._num_yielded and getattr(it, "_flor_start", None) is None:
        raise ValueError("a DataLoader iterator that produced batches before flor started")
    return {
        "k": "loader_iter",
        "yielded": it._num_yielded,
        "start": getattr(it, "_flor_start", None),
        "base_seed": it._base_seed,
    }


def restore(cur: Any, node: dict[str, Any]) -> Any:
    """Put ``cur`` (this process's iterator over the same loader) where ``node`` was."""
    if "state" in node:
        return _resume(cur, node["state"])
    cur._sampler_iter = iter(cur._index_sampler)
    cur._num_yielded = 0
    cur._base_seed = node["base_seed"]
    start = node["start"]
    if start is not None and node["yielded"]:
        now = _random_state(cur)
        _set_random_state(cur, start)
        cur._flor_start = start
        for _ in range(node["yielded"]):  # the sampler's draws replayed: indices, no data
            if next(cur._sampler_iter, None) is None:
                break
        # The global generator gets the checkpoint's state when the block's restore ends;
        # a sampler's own generator is now where the recorded one was.
        torch.set_rng_state(now["torch"])
    cur._num_yielded = node["yielded"]
    return cur


def _resume(cur: Any, state: dict[str, Any]) -> Any:
    """Re-initialise ``cur`` from a recorded ``state_dict``: its worker processes are
    replaced by ones that start where the recorded ones were."""
    loader = cur._flor_loader() if _speaks_state(cur) else None
    if loader is None:
        raise ValueError("the loader this iterator came from is gone")
    shutdown = getattr(cur, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    # Creating an iterator draws from the random streams; this restore must not move them.
    own = loader.generator
    saved = (torch.get_rng_state(), own.get_state() if own is not None else None)
    type(cur).__init__(cur, loader, state)
    torch.set_rng_state(saved[0])
    if own is not None:
        own.set_state(saved[1])
    if hasattr(loader, "_iterator"):
        loader._iterator = cur  # as in the full run: the loader's current iterator
    return cur


def _generators(it: Any) -> list[torch.Generator]:
    """The samplers' own generators (``RandomSampler(generator=g)``), if any."""
    found = []
    for sampler in (it._index_sampler, getattr(it._index_sampler, "sampler", None)):
        g = getattr(sampler, "generator", None)
        if isinstance(g, torch.Generator):
            found.append(g)
    return found


def _random_state(it: Any) -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "own": [g.get_state() for g in _generators(it)]}


def _set_random_state(it: Any, state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    for g, s in zip(_generators(it), state["own"]):
        g.set_state(s)
