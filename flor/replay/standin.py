"""One process standing in for a recorded distributed job (``ReplayWorld.standin``).

The script keeps working unchanged: ``init_process_group`` creates a real gloo
group of one process (whatever backend and rendezvous the script names), and
``get_rank``/``get_world_size`` and torchrun's variables (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ...) give the recorded rank's view, so
``DistributedSampler`` picks that rank's shard and ``if rank == 0:`` prints what
it printed. A collective carrying data would return this process's values alone
where the record combined N ranks': it raises instead (``refuse``), never
answers wrongly. ``barrier`` has nothing to combine and stays.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NoReturn

from flor.replay.world import ReplayWorld

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_to_all",
    "all_to_all_single",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "recv",
    "isend",
    "irecv",
)


def install(world: ReplayWorld, refuse: Callable[[str], NoReturn]) -> None:
    """Make ``torch.distributed`` play ``world.rank`` of ``world.world_size`` in this
    process; ``refuse(name)`` is called by a collective the script calls."""
    import torch.distributed as dist

    os.environ.update(
        RANK=str(world.rank),
        WORLD_SIZE=str(world.world_size),
        LOCAL_RANK=str(world.rank),
        LOCAL_WORLD_SIZE=str(world.world_size),  # one node: flor records no multi-node jobs
    )
    # Read, never used (the group above needs no rendezvous), by libraries that check them
    # before they create the group themselves: accelerate's PartialState refuses without.
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    real_init = dist.init_process_group
    real_rank, real_size = dist.get_rank, dist.get_world_size

    def init_process_group(*args: Any, timeout: Any = None, **kwargs: Any) -> None:
        extra = {"timeout": timeout} if timeout is not None else {}
        store = dist.HashStore()  # type: ignore[attr-defined]
        real_init("gloo", store=store, rank=0, world_size=1, **extra)

    def get_rank(group: Any = None) -> int:
        return world.rank if group is None or group is dist.group.WORLD else real_rank(group)

    def get_world_size(group: Any = None) -> int:
        return world.world_size if group is None or group is dist.group.WORLD else real_size(group)

    dist.init_process_group = init_process_group
    dist.get_rank, dist.get_world_size = get_rank, get_world_size
    for name in COLLECTIVES:
        if hasattr(dist, name):
            setattr(dist, name, _refusing(name, refuse))


def _refusing(name: str, refuse: Callable[[str], NoReturn]) -> Callable[..., NoReturn]:
    def collective(*args: Any, **kwargs: Any) -> NoReturn:
        refuse(name)

    collective.__name__ = name
    return collective
