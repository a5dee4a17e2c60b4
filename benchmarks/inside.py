"""``flor`` run in this process, a piece of it timed from inside the recording.

    python benchmarks/inside.py stall|bookkeeping OUT -- run --name NAME SCRIPT ARGS

What ``bench_stall.py --shapes`` and ``bench_step_cost.py`` measure inside a real recording:

- ``stall``: at each checkpoint, ``Checkpointer.take`` beside a plain copy of what changed
  (in turn one before the other), a line of JSON each in OUT.
- ``bookkeeping``: each iteration's bookkeeping (the recorder's turn and block end, as they
  add to flor's figure), over every iteration and over those that took no checkpoint;
  one JSON object in OUT.

The piece is patched as recording starts, after flor rewrote the script (in a child) and
imported torch, as ``flor run`` does: patched before, torch would have imported first, and
flor would have rewritten the script in this process, charging both to the run's budget
(and buying fewer checkpoints). So this module imports neither torch nor flor's runtime at
its top.
"""

from __future__ import annotations

import atexit
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_flor(argv: list[str], patch: Callable[[], None]) -> None:
    """``flor ARGV`` here, ``patch()`` called as its recording starts."""
    from flor.cli import main
    from flor.launch import record

    record_here = record.record_here

    def patched(*args: Any, **kwargs: Any) -> Any:
        patch()
        return record_here(*args, **kwargs)

    record.record_here = patched  # type: ignore[assignment]
    sys.argv = ["flor", *argv]
    main()


def stall(out: Path) -> Callable[[], None]:
    def patch() -> None:
        from flor.runtime.checkpoints.checkpointer import Checkpointer
        from flor.runtime.state.kinds import stateful_in_scope
        from flor.runtime.state.scope import visible_names

        take = Checkpointer.take
        seen: dict[int, tuple[int, int]] = {}  # a tensor's id: its version and address
        taken = [0]  # checkpoints so far: the plain copy goes first in every other one

        def timed(self: Checkpointer, *args: Any) -> Any:
            objs, named, frame = args[2:]
            values = [*objs, *named.values(), *stateful_in_scope(visible_names(frame)).values()]
            first = taken[0] % 2 == 0
            taken[0] += 1
            start = time.perf_counter()
            if first:
                plain_state_copy(values, seen)
            middle = time.perf_counter()
            result = take(self, *args)
            end = time.perf_counter()
            if not first:
                plain_state_copy(values, seen)
            plain = middle - start if first else time.perf_counter() - end
            with out.open("a") as f:
                f.write(json.dumps({"take": end - middle, "plain": plain}) + "\n")
            return result

        Checkpointer.take = timed  # type: ignore[method-assign]

    return patch


def plain_state_copy(values: list[Any], seen: dict[int, tuple[int, int]]) -> None:
    """A ``clone`` of each tensor of this state that is new or was written since the last
    copy (``seen``: a tensor's id, its version and address then): what a script's own copy
    of what changed copies."""
    copies = []
    for t in _tensors(values):
        mark = (t._version, t.data_ptr())
        if seen.get(id(t)) != mark:
            copies.append(t.detach().clone())
        seen[id(t)] = mark


def _tensors(values: list[Any]) -> list[Any]:
    """The modules' parameters, buffers and gradients, the optimizers' state, the tensors."""
    import torch

    out: list[torch.Tensor] = []
    for v in {id(v): v for v in values}.values():  # a model named and in scope: once
        if isinstance(v, torch.nn.Module):
            out += [*v.parameters(), *v.buffers()]
            out += [p.grad for p in v.parameters() if p.grad is not None]
        elif isinstance(v, torch.optim.Optimizer):
            out += [t for s in v.state.values() for t in s.values() if torch.is_tensor(t)]
        elif isinstance(v, torch.Tensor):
            out.append(v)
    return out


def bookkeeping(out: Path) -> Callable[[], None]:
    cost: dict[int, float] = {}  # an iteration's: the turn that ends it, its block ends
    taken: set[int] = set()

    def noted(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            g, before = self.iteration, self.policy.bookkeeping
            try:
                return method(self, *args, **kwargs)
            finally:
                if g is not None:
                    cost[g] = cost.get(g, 0.0) + self.policy.bookkeeping - before

        return wrapper

    def patch() -> None:
        from flor.runtime.checkpoints.checkpointer import Checkpointer
        from flor.runtime.loop.recorder import Recorder

        take = Checkpointer.take

        def noting_take(self: Checkpointer, g: int, *args: Any) -> Any:
            taken.add(g)
            return take(self, g, *args)

        Recorder._turn = noted(Recorder._turn)  # type: ignore[method-assign]
        Recorder.block_end = noted(Recorder.block_end)  # type: ignore[method-assign]
        Checkpointer.take = noting_take  # type: ignore[method-assign]
        atexit.register(report)

    def report() -> None:
        without = [c for g, c in cost.items() if g not in taken]
        every = sum(cost.values()) / len(cost) * 1e6
        figures = {"every": every, "without": sum(without) / len(without) * 1e6}
        out.write_text(json.dumps({**figures, "checkpoints": len(taken)}))

    return patch


PATCHES = {"stall": stall, "bookkeeping": bookkeeping}

if __name__ == "__main__":
    what, out, *rest = sys.argv[1:]
    run_flor(rest[1:] if rest[:1] == ["--"] else rest, PATCHES[what](Path(out)))
