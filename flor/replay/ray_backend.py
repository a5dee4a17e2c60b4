"""Replay segments as Ray tasks: across the machines of a Ray cluster, retried on failure.

Each task takes one job, replays it in a process of its own on a worker (one GPU
per task when the cluster has GPUs, one CPU otherwise) and returns that segment's
result; the task's body is the caller's (``flor.launch.worker.on_ray``). The
replay stores its record too: on S3 when the workers are other machines, in the
local store otherwise. The script's folder
travels as the tasks' Ray ``working_dir``, and the variables that say where
the store is (``FLOR_STORE``/``FLOR_HOME``, AWS credentials and endpoint) as
their ``env_vars``; workers need only flor and the script's dependencies.

A task whose process fails, or whose worker dies, is retried ``RETRIES``
times; a segment that keeps failing is reported with its error, and the
other segments' results are kept.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from flor.errors import FlorError
from flor.replay.local import SegmentFailure
from flor.runs.records import SegmentResult
from flor.store import STORE_ENV

RETRIES = 2
_SHIPPED_ENV = (*STORE_ENV, "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG")
_EXCLUDES = (".git", ".venv", "venv", "__pycache__", "*.pt", "*.ckpt", ".flor")


class SegmentFailed(Exception):
    """A segment's process exited non-zero (raised inside the task, so Ray retries it)."""

    def __init__(self, exit_status: int, stderr: str) -> None:
        super().__init__(exit_status, stderr)
        self.exit_status = exit_status
        self.stderr = stderr


def shipped_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What workers must see to reach the store: flor's store variables and AWS's."""
    return {k: v for k, v in environ.items() if k in _SHIPPED_ENV or k.startswith("AWS_")}


def run_segments_on_ray(
    body: Callable[[Any], SegmentResult],
    jobs: list[Any],
    home: str,
    address: str,
    working_dir: str,
    env_vars: dict[str, str],
    progress: Callable[[str], None],
    label: Callable[[int], str] | None = None,
) -> tuple[list[SegmentResult], list[SegmentFailure]]:
    """Run ``body`` on each of ``jobs`` (segments 1..len(jobs)) as Ray tasks; return their
    results and the ones that failed (``body`` raises ``SegmentFailed``: Ray retries it).

    ``home`` is the local store: kept from travelling with ``working_dir``. ``label``: how
    progress names a segment."""
    try:
        import ray
    except ImportError:
        raise FlorError(
            "no-ray", "--backend ray needs Ray on this machine: pip install 'flor[ray]'"
        ) from None
    runtime_env = {
        "working_dir": working_dir,
        "env_vars": env_vars,
        "excludes": [*_EXCLUDES, *_stores_inside(home, working_dir)],
    }
    local: dict[str, Any] = {"include_dashboard": False} if address == "local" else {}
    _check_reachable(address)
    with contextlib.redirect_stdout(sys.stderr):  # Ray's own messages must not mix with output
        try:
            ray.init(address=address, runtime_env=runtime_env, log_to_driver=False, **local)
        except Exception as e:  # a wrong address, an unreachable head, a folder too big to ship
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise FlorError("ray-init", f"cannot start Ray tasks at {address}: {why}") from None
        try:
            named = label or (lambda index: f"segment {index}/{len(jobs)}")
            return _run(ray, body, jobs, progress, named)
        finally:
            ray.shutdown()


def _run(
    ray: Any,
    body: Callable[[Any], SegmentResult],
    jobs: list[Any],
    progress: Callable[[str], None],
    label: Callable[[int], str],
) -> tuple[list[SegmentResult], list[SegmentFailure]]:
    gpus = ray.cluster_resources().get("GPU", 0)
    task = ray.remote(body).options(
        num_gpus=1 if gpus else 0,
        num_cpus=0 if gpus else 1,
        max_retries=RETRIES,
        retry_exceptions=True,
    )
    progress(f"{len(jobs)} Ray tasks, one per {'GPU' if gpus else 'CPU'}")
    started = time.perf_counter()
    pending = {task.remote(job): i for i, job in enumerate(jobs, 1)}
    results, failures = [], []
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        index = pending.pop(ref)
        try:
            results.append(ray.get(ref))
            progress(f"{label(index)} done in {time.perf_counter() - started:.1f}s")
        except Exception as e:  # after the retries: keep the others' results
            failures.append(_failure(index, e))
            progress(f"{label(index)} failed after {RETRIES} retries")
    return results, failures


def _check_reachable(address: str) -> None:
    """Ray keeps retrying an address nobody listens on for minutes: refuse it at once."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if address in ("local", "auto") or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise FlorError("ray-unreachable", f"no Ray head answers at {address}: {e}") from None


def _stores_inside(home: str, folder: str) -> list[str]:
    """A local store (or cache) kept inside the script's folder must not travel with it."""
    home = os.path.abspath(home)
    inside = os.path.commonpath([home, os.path.abspath(folder)]) == os.path.abspath(folder)
    return (
        ["/" + os.path.relpath(home, folder)] if inside and home != os.path.abspath(folder) else []
    )


def _failure(index: int, error: Exception) -> SegmentFailure:
    cause = getattr(error, "cause", None)
    if isinstance(cause, SegmentFailed):
        return SegmentFailure(index, cause.exit_status, cause.stderr)
    return SegmentFailure(index, -1, f"{type(error).__name__}: {error}")
