"""Run the segments of one replay in local worker processes, K at a time.

Each worker is a process of its own (spawned, never forked from a training process),
started from the command line the caller gives; what a failed one wrote on stderr is
kept for its error.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from flor.errors import DIVERGED


@dataclass
class SegmentFailure:
    index: int
    exit_status: int
    stderr: str


def run_segments(
    command: Callable[[int], list[str]],
    count: int,
    workers: int,
    progress: Callable[[str], None],
    meanwhile: Callable[[], None] = lambda: None,
    label: Callable[[int], str] | None = None,
) -> list[SegmentFailure]:
    """Run segments 1..count, at most ``workers`` at once; return the ones that failed.
    ``meanwhile`` runs once the first workers started (they import torch meanwhile); if it
    raises, the workers are stopped. ``label``: how progress names a segment."""
    label = label or (lambda index: f"segment {index}/{count}")
    pending = list(range(1, count + 1))
    running: dict[
        int, tuple[subprocess.Popen[bytes], float, tempfile._TemporaryFileWrapper[bytes]]
    ] = {}
    failures: list[SegmentFailure] = []
    meanwhile_ran = False
    while pending or running:
        while pending and len(running) < workers:
            index = pending.pop(0)
            errors = tempfile.NamedTemporaryFile(prefix="flor-segment-")  # noqa: SIM115 (a pipe could fill up)
            proc = subprocess.Popen(command(index), stdout=subprocess.DEVNULL, stderr=errors)
            running[index] = (proc, time.perf_counter(), errors)
        if not meanwhile_ran:
            meanwhile_ran = True
            try:
                meanwhile()
            except BaseException:
                for proc, _, errors in running.values():
                    proc.kill()
                    proc.wait()
                    errors.close()
                raise
        for index, (proc, started, errors) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[index]
            errors.seek(0)
            stderr = errors.read().decode(errors="replace")
            errors.close()
            seconds = time.perf_counter() - started
            if proc.returncode in (0, DIVERGED):  # diverged: its result says where
                progress(f"{label(index)} done in {seconds:.1f}s")
            else:
                failures.append(SegmentFailure(index, proc.returncode, stderr))
                progress(f"{label(index)} failed (exit status {proc.returncode})")
        time.sleep(0.02)
    return failures
