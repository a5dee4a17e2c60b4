"""flor's own start-up, done while torch imports.

Before a run or a replay starts, flor imports libcst and parses and rewrites the
script and its project files (0.5-1 s), and the script imports torch (2 s and more).
Both are single-threaded Python, so threads would only take turns. ``while_torch_imports``
forks a child for flor's part while this process imports torch: on a machine with a
second core, flor's start-up leaves the run's critical path.

The child only computes: whatever it says through the reporter, and its result or its
error, come back through a pipe and are said here, in order.
"""

from __future__ import annotations

import functools
import gc
import io
import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TypeVar, cast

from flor.errors import FlorError
from flor.runtime.process.reporter import Reporter

T = TypeVar("T")


@functools.cache
def import_torch() -> float:
    """Import torch; the seconds its first import took (0 if it was imported before flor
    asked): what a script pays with or without flor, so never charged to flor."""
    if "torch" in sys.modules:
        return 0.0
    start = time.perf_counter()
    import torch  # noqa: F401

    # torch's objects live as long as the process: exempt from the cyclic collector, the
    # next full collection (due now, and triggered by whatever allocates next: flor's
    # analysis of the script) does not walk them (0.1 s here).
    gc.freeze()
    return time.perf_counter() - start


def while_torch_imports(work: Callable[[Reporter], T], reporter: Reporter) -> T:
    """``work(reporter)``, computed in a forked child while this process imports torch.

    In this process instead, one after the other, where forking is not safe or gains
    nothing: torch already imported, other threads running, no ``fork`` (or macOS).
    ``work`` must return something picklable and must not need torch.
    """
    if not _can_fork():
        import_torch()
        return work(reporter)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running any exit handler
        try:  # whatever happens, never return into the parent's code
            os.close(read_end)
            _compute_and_send(work, reporter, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    import_torch()
    with os.fdopen(read_end, "rb") as pipe:
        sent = pipe.read()
    os.waitpid(pid, 0)
    return cast(T, _received(sent, reporter))


def _can_fork() -> bool:
    return (
        hasattr(os, "fork")
        and sys.platform != "darwin"
        and "torch" not in sys.modules
        and threading.active_count() == 1
    )


def _compute_and_send(work: Callable[[Reporter], T], reporter: Reporter, fd: int) -> None:
    said = reporter.divert(io.StringIO())
    try:
        outcome: tuple[str, object] = ("result", work(reporter))
    except FlorError as e:
        outcome = ("error", (e.slug, e.message, e.exit_code))
    except BaseException:  # a bug in flor: its traceback, said by the parent
        outcome = ("crash", traceback.format_exc())
    try:
        sent = pickle.dumps((said.getvalue(), reporter.warned(), outcome))
    except Exception:  # an unpicklable result
        sent = pickle.dumps((said.getvalue(), reporter.warned(), ("crash", traceback.format_exc())))
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(sent)


def _received(sent: bytes, reporter: Reporter) -> object:
    if not sent:
        raise RuntimeError("flor's start-up process ended without an answer")
    said, warned, (kind, value) = pickle.loads(sent)
    if said:
        reporter.write(said)
    reporter.heard(warned)
    if kind == "error":
        slug, message, exit_code = value
        error = FlorError(slug, message)
        error.exit_code = exit_code
        raise error
    if kind == "crash":
        raise RuntimeError(f"flor's start-up failed:\n{value}")
    return value
