"""Which segment this process replays when a scheduler started it: Slurm arrays, torchrun.

One sbatch line (``#SBATCH --array=1-8`` + ``flor replay --name NAME``) replays
in parallel: each task takes its segment from the environment, and all of them
write into one replay id, so their outputs sit side by side in the store.
torchrun's ``RANK``/``WORLD_SIZE`` mean segments only when the user says so
(``--segment-from-env``): under torchrun they usually mean a distributed job,
whose ranks replay in step (``flor.runtime.process.job``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flor.errors import FlorError
from flor.runtime.process.job import env_int


@dataclass(frozen=True)
class Assigned:
    segment: str  # "I/N"
    replay_id: str | None  # shared by every task of the job
    source: str  # the variables it came from, for the progress line


def segment_from_env(environ: Mapping[str, str], ranks: bool = False) -> Assigned | None:
    """The segment a Slurm array task replays (``ranks``: or a torchrun rank); None
    outside those."""
    if "SLURM_ARRAY_TASK_ID" in environ and "SLURM_ARRAY_TASK_COUNT" in environ:
        task = env_int(environ, "SLURM_ARRAY_TASK_ID")
        first = env_int(environ, "SLURM_ARRAY_TASK_MIN", 0)
        step = env_int(environ, "SLURM_ARRAY_TASK_STEP", 1) or 1
        count = env_int(environ, "SLURM_ARRAY_TASK_COUNT")
        index = (task - first) // step + 1
        job = environ.get("SLURM_ARRAY_JOB_ID")
        return _checked(
            index, count, f"slurm-{job}" if job else None, "SLURM_ARRAY_TASK_ID/_MIN/_COUNT"
        )
    if ranks and "RANK" in environ and "WORLD_SIZE" in environ:
        rank, size = env_int(environ, "RANK"), env_int(environ, "WORLD_SIZE")
        job = environ.get("TORCHELASTIC_RUN_ID")
        return _checked(rank + 1, size, f"torchrun-{job}" if job else None, "RANK/WORLD_SIZE")
    return None


def _checked(index: int, count: int, replay_id: str | None, source: str) -> Assigned:
    if not 1 <= index <= count:
        raise FlorError(
            "bad-segment", f"{source} give segment {index} of {count}, outside 1..{count}"
        )
    return Assigned(f"{index}/{count}", replay_id, source)
