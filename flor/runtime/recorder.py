"""Record mode: run the script as usual, checkpointing blocks adaptively."""

from __future__ import annotations

import atexit
import os
import platform
import sys
import time
from collections.abc import Iterator
from typing import Any

from flor.runtime import runs
from flor.runtime.codec import encode
from flor.runtime.context import Options
from flor.runtime.output import TaggedStream
from flor.runtime.policy import CheckpointPolicy
from flor.runtime.scope import cheap_values
from flor.runtime.session import (
    Frame,
    Session,
    as_iterator,
    flush_store,
    numeric_environment,
    visible_names,
)
from flor.runtime.state import Snapshot, Unrestorable, capture, capture_rng, stateful_in_scope
from flor.runtime.writer import BackgroundWriter


class Recorder(Session):
    def __init__(self, options: Options) -> None:
        super().__init__(options)
        assert options.name
        self.run_id = runs.new_id()
        self.prefix = runs.run_prefix(options.name, self.run_id)
        self.policy = CheckpointPolicy(options.epsilon)
        self.writer = BackgroundWriter(self.policy.charge)
        self.compute = 0.0  # seconds of training inside flor.it iterations
        self.checkpoint_bytes = 0  # what the checkpoints hold
        self.stored_bytes = 0  # what they added to the store, after deduplication
        self.stalls: list[float] = []  # training-thread seconds per checkpointed block
        self._timings: dict[int, float] = {}  # not yet journaled
        self._iteration_start = 0.0
        self._stall = 0.0  # flor's own time inside the open iteration
        self._checkpointing: bool | None = None  # decided at the iteration's first block end
        self._unrestorable = False  # some block's state cannot be saved: never checkpoint
        self._blocks: dict[int, dict[str, Any]] = {}
        self._block_seconds: dict[int, float] = {}
        self._block_start = 0.0
        self._closed = False
        self.meta = self._initial_meta()
        runs.put_json(self.store, f"{self.prefix}/run.json", self.meta)
        self.store.put(f"{self.prefix}/source.py", self._read_source().encode())
        if options.original is not None:
            self.store.put(f"{self.prefix}/original.py", options.original.encode())
        self.stdout = TaggedStream(sys.stdout, keep=True)  # kept per iteration, shown later
        sys.stdout = self.stdout
        atexit.register(self.close)

    def _initial_meta(self) -> dict[str, Any]:
        return {
            "name": self.options.name,
            "run_id": self.run_id,
            "script": self.options.script,
            "argv": list(self.options.argv if self.options.argv is not None else sys.argv),
            "cwd": os.getcwd(),
            "started": time.time(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "epsilon": self.options.epsilon,
            "status": "running",
            "instrumented": self.options.original is not None,
            "git_commit": _git_commit(self.options.script),
        }

    def _read_source(self) -> str:
        if self.options.source is not None:
            return self.options.source
        try:
            with open(self.options.script or "", encoding="utf-8") as f:
                return f.read()
        except OSError:
            self.warn_once(
                "source",
                f"cannot read the script {self.options.script!r}; "
                "replay will treat every block as changed",
            )
            return ""

    # -- the main loop -------------------------------------------------------------
    def main_loop(self, iterable: Any) -> Iterator[Any]:
        loop, first = self.loops, self.next_iteration
        self.loops += 1
        if loop == 0:
            self.meta["numerics"] = numeric_environment()
            runs.put_json(self.store, f"{self.prefix}/run.json", self.meta)
        iterator, _ = as_iterator(iterable)
        status = "closed"  # break, or an exception in the loop body, closes the generator
        try:
            for value in iterator:
                self._begin(self.next_iteration)
                yield value
                self._end()
            status = "exhausted"
        finally:
            if self.iteration is not None:  # the consumer left in the middle of an iteration
                self._end()
            self.stdout.bucket = "post"
            self._end_loop(loop, first, status)

    def _begin(self, iteration: int) -> None:
        self.begin_iteration(iteration)
        self._stall = 0.0
        self._checkpointing = None
        self.stdout.bucket = str(iteration)
        self._iteration_start = time.perf_counter()

    def _end(self) -> None:
        g = self.iteration
        assert g is not None
        elapsed = time.perf_counter() - self._iteration_start
        self.compute += elapsed - self._stall
        self._timings[g] = elapsed - self._stall
        if self._checkpointing and g in self._blocks:
            entry = {"iteration": g, "blocks": self._blocks[g], **self._take_timings()}
            entry["stdout"] = self.stdout.take_iterations(g)
            logs, self.logs = self.logs, []
            self.writer.submit(g, lambda: self._commit(g, entry, logs), commit=True)
        self.end_iteration()

    def _commit(self, g: int, entry: dict[str, Any], logs: list[dict[str, Any]]) -> None:
        self._write_logs(f"{g:08d}", logs)
        runs.put_json(self.store, runs.commit_key(self.prefix, g), entry)  # last: makes g visible
        self.policy.settle(g)
        del self._blocks[g]

    def _take_timings(self) -> dict[str, dict[str, float]]:
        """Seconds per iteration and per iteration's blocks since the last journal entry."""
        timings, self._timings = self._timings, {}
        blocks, self._block_seconds = self._block_seconds, {}
        return {
            "timings": {str(k): round(v, 6) for k, v in timings.items()},
            "block_timings": {str(k): round(v, 6) for k, v in blocks.items()},
        }

    def _write_logs(self, tag: str, logs: list[dict[str, Any]]) -> None:
        if logs:
            import json

            text = "".join(json.dumps(e) + "\n" for e in logs)
            self.store.put(f"{self.prefix}/logs/{tag}.jsonl", text.encode())

    def _end_loop(self, loop: int, first: int, status: str) -> None:
        entry = {
            "loop": loop,
            "first": first,
            "count": self.next_iteration - first,
            "status": status,
            **self._take_timings(),
            "stdout": self.stdout.take_iterations(self.next_iteration),
        }
        logs, self.logs = self.logs, []

        def write() -> None:
            self._write_logs(f"loop-{loop:03d}", logs)
            runs.put_json(self.store, runs.loop_end_key(self.prefix, loop), entry)

        self.writer.submit(-1, write)
        self.writer.flush()
        self._report()

    # -- blocks ----------------------------------------------------------------------
    def block_start(self, name: str, probed: bool, frame: Frame) -> bool:
        _, occurrence = self.open_block(name)
        if self.iteration is not None:
            self.stdout.bucket = f"{self.iteration}:{name}/{occurrence}"  # replay re-prints it
        self._block_start = time.perf_counter()
        return True

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame
    ) -> tuple[Any, ...]:
        name, occurrence = self.close_block()
        g = self.iteration
        if g is None:
            return (*objs, *named.values())
        self.stdout.bucket = str(g)
        start = time.perf_counter()
        self._block_seconds[g] = self._block_seconds.get(g, 0.0) + start - self._block_start
        if self._checkpointing is None and not self._unrestorable:
            compute = self.compute + (start - self._iteration_start - self._stall)
            self._checkpointing = self.policy.should_checkpoint(compute)
        if self._checkpointing:
            self._checkpoint(g, name, occurrence, objs, named, frame)
        self._stall += time.perf_counter() - start
        return (*objs, *named.values())

    def _checkpoint(
        self,
        g: int,
        name: str,
        occurrence: int,
        objs: tuple[Any, ...],
        named: dict[str, Any],
        frame: Frame,
    ) -> None:
        start = time.perf_counter()
        snap = Snapshot()

        def each(values: dict[str, Any]) -> dict[str, Any]:
            out = {}
            for label, value in values.items():
                try:
                    out[label] = capture(value, snap)
                except Unrestorable as e:
                    raise Unrestorable(f"`{label}` holds {e}") from None
            return out

        try:
            tree = {
                "objs": list(each({f"value {i + 1}": o for i, o in enumerate(objs)}).values()),
                "named": each(named),
                "scope": each(stateful_in_scope(visible_names(frame))),
                "values": each(cheap_values(frame.f_locals)),
                "rng": capture_rng(),
            }
            bound = sorted(k for k in frame.f_locals if not k.startswith("__"))
        except Unrestorable as e:
            self.warn_once(
                f"unrestorable:{name}",
                f"block {name!r} cannot be checkpointed: {e}; replay will re-execute it "
                "(every iteration, from the start)",
            )
            self._checkpointing = False
            self._unrestorable = True
            self._blocks.pop(g, None)
            return
        key = runs.ckpt_key(self.prefix, g, name, occurrence)
        blocks = self._blocks.setdefault(g, {})
        size = snap.nbytes

        def write() -> None:
            enc = encode(tree, self.store)
            self.store.put(key, enc.data)
            blocks[f"{name}/{occurrence}"] = {
                "key": key,
                "sha256": enc.sha256,
                "bytes": len(enc.data),
                "blobs": enc.blobs,
                "new_blob_bytes": enc.new_blob_bytes,
                "objs": len(tree["objs"]),
                "holds": sorted({*tree["named"], *tree["values"]}),
                "bound": bound,  # a name outside it was unbound: restoring UNBOUND is right
            }
            self.checkpoint_bytes += enc.logical
            self.stored_bytes += enc.stored

        self.writer.submit(g, write, size)
        stall = time.perf_counter() - start
        self.stalls.append(stall)
        self.policy.charge(g, stall)

    # -- the end -------------------------------------------------------------------
    def _report(self) -> None:
        overhead = self.policy.overhead(self.compute)
        self.meta.update(
            iterations=self.next_iteration,
            checkpoints=self.policy.taken,
            checkpoint_bytes=self.checkpoint_bytes,
            stored_bytes=self.stored_bytes,
            compute_seconds=round(self.compute, 3),
            overhead=round(overhead, 5),
            stall_seconds=[round(s, 6) for s in self.stalls[-1000:]],
        )
        sys.stderr.write(
            f"flor: recorded {self.options.name}/{self.run_id}: {self.next_iteration} iterations, "
            f"{self.policy.taken} checkpoints ({self.checkpoint_bytes / 1e6:.1f} MB, "
            f"{self.stored_bytes / 1e6:.1f} MB stored), "
            f"overhead {overhead:.2%} (budget {self.options.epsilon:.2%})\n"
        )

    def close(self, exit_status: int | None = None) -> None:
        """Flush every write, then record how the run ended (runs at exit, too)."""
        if self._closed:
            return
        self._closed = True
        self.writer.close()
        self.meta.update(
            status="finished" if not exit_status else "failed",
            exit_status=exit_status,
            ended=time.time(),
            warnings=self.writer.warnings,
        )
        if self.loops == 0 and not exit_status:
            sys.stderr.write(
                f"flor: warning: run {self.options.name}/{self.run_id} has no checkpoints: the "
                "script never entered a flor.it loop (see the notes above); `flor replay` "
                "re-runs it whole\n"
            )
        text = self.stdout.text()
        runs.put_json(
            self.store, f"{self.prefix}/stdout.json", {k: text.get(k, "") for k in ("pre", "post")}
        )
        runs.put_json(self.store, f"{self.prefix}/run.json", self.meta)
        self.upload_failed = not flush_store(self.store)


def _git_commit(script: str | None) -> str | None:
    """The commit of the repository the script lives in, if any (for run identity)."""
    import subprocess

    folder = os.path.dirname(os.path.abspath(script)) if script else os.getcwd()
    try:
        out = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
