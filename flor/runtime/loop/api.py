"""The public runtime API. Each call is a no-op when no run is active."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from flor.runtime.loop import context

T = TypeVar("T")


def it(iterable: Iterable[T] | Callable[[], bool]) -> Iterator[T]:
    """Wrap the main loop: ``for epoch in flor.it(range(n)):``.

    Each pass of the loop body is one iteration: the unit flor checkpoints and
    replays. Any iterable works, unbounded ones included, and ``break`` is fine.
    For a ``while cond:`` loop pass the condition as a function, re-evaluated
    before every iteration: ``for _ in flor.it(lambda: step < max_steps):``.
    """
    session = context.current()
    if session is None:
        if callable(iterable) and not hasattr(iterable, "__iter__"):
            from flor.runtime.loop.session import as_iterator

            return as_iterator(iterable)[0]
        return iter(iterable)
    return session.loop(iterable)


class SkipBlock:
    """A region of the loop body that replay may skip, restoring its effects.

    ::

        if flor.SkipBlock.step_into("training"):
            for batch in loader:
                ...
        model, optimizer, step = flor.SkipBlock.end(model, optimizer, step)
    """

    @staticmethod
    def step_into(name: str, probed: bool = False) -> bool:
        """Whether to run the block (always, unless replay restores it instead).

        Args:
            name: the block's name, unique within the script.
            probed: force the block to run on replay, as if its code had changed.
        """
        session = context.session  # read directly: this and end() run every iteration
        if session is None:
            return True
        return session.block_start(name, probed, None)  # the frame: fetched where needed

    @staticmethod
    def end(*objs: Any, **named: Any) -> Any:
        """End the block: checkpoint ``objs`` when recording, restore them when skipped.

        Returns the objects, so that immutable values can be rebound
        (``step, loss = flor.SkipBlock.end(model, step, loss)``); one object is
        returned as itself. Objects with ``state_dict``, containers and plain
        objects are restored in place. Objects with a ``state_dict`` that are
        bound in the calling scope (or on ``self``) are saved and restored too,
        even when not listed, so a scheduler stepped outside the block is safe;
        other values the loop carries from one iteration to the next (a
        ``best_acc`` tracker) must be listed. A name that may be unbound is passed as
        ``locals().get("name", flor.UNBOUND)``. Values passed by keyword
        (what ``flor instrument`` writes) are restored by name, so an edit that
        changes which values a block carries cannot restore one into another.
        """
        session = context.session
        out = (*objs, *named.values()) if session is None else session.block_end(objs, named, None)
        if len(out) == 1:
            return out[0]
        return out if out else None


def callback(name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """What ``flor run`` puts on a function the script hands to its own code (a trainer's
    ``set_callback("on_batch_end", fn)``): a recording notes which blocks run it, so that
    replay knows an edit to it leaves the other blocks' training alone."""

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        session = context.session
        if session is not None:
            session.callbacks.add(name)

        @functools.wraps(fn)
        def noted(*args: Any, **kwargs: Any) -> T:
            session = context.session
            if session is not None:
                session.note_call(name)
            return fn(*args, **kwargs)

        return noted

    return decorate


def globals_of(module: str) -> dict[str, Any]:
    """The globals of project module ``module`` (imported if it is not yet): where an
    instrumented block's ``SkipBlock.end`` restores the module globals that a function of
    another file, called by the block, rebinds or mutates."""
    import importlib

    return vars(importlib.import_module(module))


def log(name: str, value: T, step: int | None = None) -> T:
    """Record ``value`` under ``name`` for the current iteration; returns ``value``."""
    session = context.current()
    if session is not None:
        session.log(name, value, step)
    return value
