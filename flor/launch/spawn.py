"""Scripts that start their own ranks with ``mp.spawn``: each process one rank of a job.

The ImageNet-example shape: ``main()`` parses its arguments and calls
``mp.spawn(main_worker, args=(ngpus, args), nprocs=ngpus)``, and the main loop
is in ``main_worker``. flor's process runs ``main()`` as usual under a
``SpawnParent``: it hosts the job's key-value store (what torchrun's agent
hosts for its ranks) and makes ``mp.spawn`` start flor's ``Worker`` instead.
In each process the worker runs the rewritten script as ``__mp_main__`` under a
session of rank ``i`` (a recorder, or a replayer in step with the other ranks),
then calls ``main_worker(i, *args)``. Recording and replay then work exactly as
under torchrun (``flor.runtime.process.job``).
"""

from __future__ import annotations

import os
import pickle
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from flor.launch import process_end
from flor.launch.execfile import user_traceback
from flor.runtime.loop.session import Session, as_iterator
from flor.runtime.process.job import WAIT, Job
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.runtime.state.scope import Frame
from flor.store import Store, shared_url


class SpawnParent(Session):
    """The session of the process that calls ``mp.spawn``: its ranks record or replay."""

    def __init__(
        self, options: Options, store: Store, reporter: Reporter, begin: Callable[..., Session]
    ) -> None:
        """``begin``: how a rank starts its own session (``launch.start.start``)."""
        super().__init__(options, store, reporter)
        self.begin = begin
        from torch.distributed import TCPStore  # type: ignore[attr-defined]

        self._kv = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=WAIT)
        self.jobs = 0  # mp.spawn calls so far: each is a job, and a run, of its own
        self._real_spawn: Callable[..., Any] = _torch_mp().spawn
        _torch_mp().spawn = self._spawn

    def _spawn(
        self, fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int = 1, **kwargs: Any
    ) -> Any:
        worker = Worker(
            self.options,
            shared_url(self.store.url),
            self._kv.port,
            nprocs,
            self.jobs,
            fn.__qualname__,
            pickle.dumps(args),  # read back once the worker has the script's classes
            tuple(sys.argv),
            self.begin,  # pickled by reference: the worker imports it
        )
        self.jobs += 1
        main = sys.modules["__main__"]
        hidden = main.__dict__.pop("__file__", None), main.__spec__
        main.__spec__ = None  # the workers run the rewritten script, not the file
        try:
            return self._real_spawn(worker, args=(), nprocs=nprocs, **kwargs)
        finally:
            if hidden[0] is not None:
                main.__file__ = hidden[0]
            main.__spec__ = hidden[1]

    def main_loop(self, iterable: Any) -> Iterator[Any]:
        return as_iterator(iterable)[0]  # the training loop runs in the ranks

    def block_start(self, name: str, probed: bool, frame: Frame | None) -> bool:
        return True

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame | None
    ) -> tuple[Any, ...]:
        return (*objs, *named.values())

    def close(self, exit_status: int | None = None) -> None:
        _torch_mp().spawn = self._real_spawn
        if not self.jobs and not exit_status:
            self.reporter.warn("the script never called mp.spawn: there is nothing to record")


def _torch_mp() -> Any:
    import importlib

    return importlib.import_module("torch.multiprocessing")


@dataclass(frozen=True)
class Worker:
    """What ``mp.spawn`` runs in rank ``index``'s process instead of the script's function."""

    options: Options
    store_url: str
    port: int
    nprocs: int
    job: int
    function: str  # qualified name in the script
    args: bytes  # pickled
    argv: tuple[str, ...]  # the script's, when it called mp.spawn
    begin: Callable[..., Session]  # starts this rank's session (``launch.start.start``)

    def __call__(self, index: int) -> None:
        from flor import runs
        from flor.store import StoreSettings

        reporter = Reporter()
        settings = StoreSettings.from_env(os.environ)
        recording = self.options.mode == "record"
        store = runs.open_store(self.store_url, settings, warn=reporter.warn, spool=recording)
        job = Job(index, self.nprocs, index, self.job, "127.0.0.1", self.port, "mp.spawn")
        session = self.begin(self.options, store, reporter, job)
        status = 1
        try:
            fn = _load_script(self.options, self.argv).__dict__
            for part in self.function.split("."):
                fn = fn[part] if isinstance(fn, dict) else getattr(fn, part)
            fn(index, *pickle.loads(self.args))  # type: ignore[operator]
            status = 0
        except SystemExit as e:  # a replay past its last iteration, or the script's own exit
            status = e.code if isinstance(e.code, int) else 1
            raise
        except Exception as e:  # torch would print it on the rewritten script's line numbers
            script, source = self.options.script or "", self.options.source or ""
            reporter.write(user_traceback(e, script, source, self.options.original))
            raise SystemExit(1) from None  # mp.spawn then says which process exited
        finally:
            session.close(status)
        # Done, and committed: leave as the flor command does (``process_end``), without the
        # interpreter's teardown, in which a rank that ran gloo has aborted ("terminate
        # called without an active exception") on this loaded host after its work was done.
        process_end.end(0)


def _load_script(options: Options, argv: tuple[str, ...]) -> types.ModuleType:
    """The rewritten script, run as ``__mp_main__`` (its ``__main__`` block does not run),
    with the project's files rewritten as they are imported."""
    from flor.launch import import_hook

    script = options.script or ""
    module = types.ModuleType("__mp_main__")
    module.__file__ = script
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module  # pickles find its classes
    sys.argv[:] = list(argv)
    sys.path.insert(0, os.path.dirname(script))
    import_hook.install(import_hook.rewritten_files(options))
    exec(compile(options.source or "", script, "exec", dont_inherit=True), module.__dict__)
    return module
