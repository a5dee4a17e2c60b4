"""Which recorded rank a replay process plays, and whether it stands in for the whole job.

A run recorded by one process replays in one process (or in segments). A run
recorded by a job of N processes replays either

- *in step*, under ``torchrun --nproc_per_node N``: each rank restores its own
  journal, all ranks follow one plan (every iteration of the segment, so that
  their collectives meet), and the script's process group is real; or
- *standing in*, in one process with no launcher: the process plays rank R
  (``--rank``, default 0) of the recorded world through a one-process group
  (``flor.replay.standin``). Only restored state is exact there: a block that
  must re-execute, or a collective outside the blocks, would see one rank's
  values instead of N ranks', so replay refuses those in one line.
"""

from __future__ import annotations

from dataclasses import dataclass

from flor.errors import FlorError
from flor.runs.records import RunMeta
from flor.runtime.process.job import Job


@dataclass(frozen=True)
class ReplayWorld:
    rank: int  # whose journal this process restores
    world_size: int  # of the recorded job (1: a single process)
    standin: bool  # one process plays a rank of a larger recorded job

    @property
    def in_step(self) -> bool:
        """Several processes replay one job together: their plans must agree."""
        return self.world_size > 1 and not self.standin


def replay_world(meta: RunMeta, job: Job | None, rank: int | None) -> ReplayWorld:
    """The world a replay of the run ``meta`` describes runs in, in this process (``job``:
    the torchrun job it is part of; ``rank``: what ``--rank`` asked for)."""
    run, recorded = f"{meta.name}/{meta.run_id}", meta.world_size
    if recorded <= 1:
        if job is not None:
            raise FlorError(
                "not-distributed",
                f"run {run} was recorded by one process; to replay its segments on "
                f"torchrun's {job.world_size} ranks, add --segment-from-env",
            )
        if rank:
            raise FlorError(
                "bad-rank", f"run {run} was recorded by one process: it has no rank {rank}"
            )
        return ReplayWorld(0, 1, standin=False)
    if job is None:
        chosen = rank or 0
        if not 0 <= chosen < recorded:
            raise FlorError(
                "bad-rank", f"run {run} has ranks 0..{recorded - 1}; there is no rank {chosen}"
            )
        return ReplayWorld(chosen, recorded, standin=True)
    if job.world_size != recorded:
        raise FlorError(
            "world-size",
            f"run {run} was recorded by {recorded} processes; this replay has "
            f"{job.world_size}: launch it with torchrun --nproc_per_node {recorded}",
        )
    if rank is not None:
        raise FlorError(
            "bad-option",
            "--rank is for a replay in one process; under torchrun each rank replays its own",
        )
    return ReplayWorld(job.rank, recorded, standin=False)


def needs_world(world: ReplayWorld, name: str, why: str) -> FlorError:
    """The one-line refusal of what a stand-in cannot replay exactly."""
    return FlorError(
        "needs-world",
        f"{why}, which needs all {world.world_size} processes of the recorded job: replay "
        f"under torchrun --nproc_per_node {world.world_size} $(which flor) replay --name {name}",
    )
