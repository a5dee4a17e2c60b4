"""Which distributed job this process is one rank of, and agreeing with the other ranks.

Under torchrun (and launchers built on it: accelerate, ``python -m
torch.distributed.run``) every rank sees ``RANK``, ``WORLD_SIZE`` and the
launcher's key-value store at ``MASTER_ADDR:MASTER_PORT``
(``TORCHELASTIC_USE_AGENT_STORE``). flor talks to that store, never to the
script's process group: it agrees before the script has created one, and its
messages cannot get in the way of the script's collectives.
"""

from __future__ import annotations

import datetime
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flor.errors import FlorError

# How long a rank waits for rank 0 (which may be busy checkpointing, or slower).
WAIT = datetime.timedelta(minutes=30)


@dataclass
class Job:
    """This process's place in a job of ``world_size`` processes."""

    rank: int
    world_size: int
    local_rank: int
    restart: int  # torchrun's restart count: a restarted job is a new run
    host: str
    port: int
    launcher: str = "torchrun"  # or mp.spawn, whose parent process hosts the store
    _store: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # writer thread too
    _outbox: queue.Queue[tuple[str, str, str] | None] = field(
        default_factory=queue.Queue, repr=False
    )
    _sender: threading.Thread | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Job | None:
        """The job ``environ`` describes; None for a single process (world size 1)."""
        if "RANK" not in environ or "WORLD_SIZE" not in environ:
            return None
        rank, world = env_int(environ, "RANK"), env_int(environ, "WORLD_SIZE")
        if world <= 1:
            return None
        if not 0 <= rank < world:
            raise FlorError("bad-env", f"RANK={rank} is outside 0..{world - 1} (WORLD_SIZE)")
        if environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
            raise FlorError(
                "no-launcher",
                f"RANK and WORLD_SIZE are set ({rank} of {world}) but not by torchrun: flor "
                "records and replays distributed jobs launched with torchrun",
            )
        return cls(
            rank,
            world,
            env_int(environ, "LOCAL_RANK", rank),
            env_int(environ, "TORCHELASTIC_RESTART_COUNT", 0),
            environ.get("MASTER_ADDR", "localhost"),
            env_int(environ, "MASTER_PORT"),
        )

    def connect(self) -> Any:
        """A client of the job's store of its own (one per thread that blocks on it)."""
        from torch.distributed import TCPStore  # type: ignore[attr-defined]

        return TCPStore(self.host, self.port, is_master=False, timeout=WAIT)

    def key(self, key: str) -> str:
        return f"flor/{self.restart}/{key}"

    def _call(self, method: str, key: str, *args: Any) -> Any:
        with self._lock:
            if self._store is None:
                self._store = self.connect()
            full = self.key(key)
            return getattr(self._store, method)([full] if method == "check" else full, *args)

    def agree(self, key: str, proposal: str) -> str:
        """One value for ``key`` on every rank: the first rank's ``proposal``."""
        value: bytes = self._call("compare_set", key, "", proposal)
        return value.decode()

    def publish(self, key: str, value: str) -> None:
        """Set ``key`` off this thread, in order: a store round trip costs a busy machine
        hundreds of microseconds, and rank 0's training need not wait for it."""
        if self._sender is None:
            self._sender = threading.Thread(target=self._send, name="flor-job", daemon=True)
            self._sender.start()
        self._outbox.put(("set", key, value))

    def forget(self, key: str) -> None:
        self._outbox.put(("delete_key", key, ""))

    def _send(self) -> None:
        while (item := self._outbox.get()) is not None:
            method, key, value = item
            try:
                self._call(method, key, *([value] if method == "set" else []))
            except Exception:  # the job is gone (a rank died): torchrun ends it
                return

    def close(self) -> None:
        """Send what is still queued (the other ranks wait for it)."""
        if self._sender is not None:
            self._outbox.put(None)
            self._sender.join()

    def share(self, key: str, value: str) -> None:
        """Set ``key`` now, on this thread (``publish`` sends in the background)."""
        self._call("set", key, value)

    def append(self, key: str, value: str) -> None:
        self._call("append", key, value)

    def peek(self, key: str) -> str | None:
        """What is under ``key`` now; None if nothing yet (without waiting)."""
        if not self._call("check", key):
            return None
        return self.wait(key)

    def wait(self, key: str) -> str:
        """What a rank published under ``key`` (waiting until it has)."""
        value: bytes = self._call("get", key)
        return value.decode()

    def feed(self, prefix: str, start: int = 0) -> Feed:
        """What a rank publishes under ``PREFIX/START``, ``PREFIX/START+1``, ... read ahead,
        in order."""
        return Feed(self, prefix, start)


class Feed:
    """Values another rank publishes one after another, read by a thread of their own.

    The training thread then finds each value already here, instead of paying a
    round trip through the store (hundreds of microseconds on a busy machine) at
    the moment it needs it.
    """

    END = "end"  # published after the last value: the reader stops (its store may close)

    def __init__(self, job: Job, prefix: str, start: int) -> None:
        self._values: dict[int, str] = {}
        self._failure: BaseException | None = None
        self._ready = threading.Condition()
        reader = threading.Thread(target=self._read, args=(job, prefix, start), daemon=True)
        reader.name = "flor-feed"
        reader.start()

    def _read(self, job: Job, prefix: str, index: int) -> None:
        try:
            store = job.connect()
            while (value := store.get(job.key(f"{prefix}/{index}")).decode()) != Feed.END:
                with self._ready:
                    self._values[index] = value
                    self._ready.notify_all()
                index += 1
            failure: BaseException = EOFError(
                f"{prefix}/{index}: rank 0 ended before this rank asked for it (the ranks ran "
                "different iterations)"
            )
        except BaseException as e:  # the job is gone, or rank 0 went silent past WAIT
            failure = e
        with self._ready:
            self._failure = failure
            self._ready.notify_all()

    def get(self, index: int) -> str:
        """The ``index``-th value (waiting until it has come)."""
        with self._ready:
            while index not in self._values:
                if self._failure is not None:
                    raise self._failure
                self._ready.wait()
            return self._values.pop(index)


def env_int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(text or "")
    except ValueError:
        raise FlorError("bad-env", f"{name}={text!r} is not a whole number") from None
