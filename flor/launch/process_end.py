"""How the ``flor`` command ends its process: without Python's teardown.

A process that imported torch spends 0.7-1.2 s after its last line tearing the
interpreter down (clearing every module, running destructors), the same for
``python train.py`` as for ``flor replay``. A replay that restores its way to a
print in a few seconds would pay a quarter of its time for that. ``end`` does what
the teardown does that anyone could notice, in the order Python does it, then leaves
with ``os._exit``:

1. waits for the threads that are not daemons (the script's, and flor's uploader);
2. runs the ``atexit`` handlers (logging, multiprocessing, ``weakref.finalize``, the
   script's own);
3. flushes every open file still buffered, the script's included (a file opened
   without ``close`` is written out by its destructor at teardown, so here too), and
   the standard streams.

Not done: other destructors (``__del__``) of objects still alive at exit. A temporary
file that only a destructor would remove stays behind.
"""

from __future__ import annotations

import atexit
import gc
import io
import os
import sys
import threading


def end(status: int) -> None:
    """End the process with ``status``; never returns."""
    _join_threads()
    atexit._run_exitfuncs()
    _flush_files()
    os._exit(status)


def exit_status(code: object) -> int:
    """What ``sys.exit(code)`` makes the exit status, saying a message as Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _join_threads() -> None:
    main = threading.main_thread()
    while True:
        waiting = [t for t in threading.enumerate() if t is not main and not t.daemon]
        if not waiting:
            return
        for t in waiting:
            t.join()


def _flush_files() -> None:
    # type(), not isinstance: an object may answer __class__ itself (and warn, or fail)
    files = [o for o in gc.get_objects() if issubclass(type(o), io.IOBase)]
    for f in (*files, sys.stdout, sys.stderr):  # the standard streams last, as at teardown
        try:
            if f is not None and not f.closed:
                f.flush()
        except Exception:  # detached, closed underneath, a broken pipe: ignored, as at teardown
            pass
