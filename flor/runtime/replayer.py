"""Replay mode: re-run the edited script, restoring checkpoints instead of training."""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flor.errors import CorruptCheckpoint, FlorError
from flor.runtime import runs
from flor.runtime.context import Options
from flor.runtime.execfile import read_script
from flor.runtime.loader import CheckpointLoader
from flor.runtime.output import TaggedStream
from flor.runtime.plan import DEAD, QUIET, Plan, make_plan, parse_iterations, segment_bounds
from flor.runtime.session import (
    Scope,
    Session,
    as_iterator,
    flush_store,
    numeric_environment,
)
from flor.runtime.state import restore, restore_rng, stateful_in_scope
from flor.transform import compare


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay of one segment will do, decided before anything runs."""

    plan: Plan
    live: frozenset[int]
    probed: frozenset[str]
    grown: frozenset[str]  # probed because their end() now carries more state


def plan_replay(run: runs.RecordedRun, source: str, script: str, options: Options) -> ReplayPlan:
    """Plan a replay of ``run`` with the edited ``source``; one-line errors for what cannot be."""
    changes = compare(run.source, source, script)
    if changes.missing or changes.added:
        parts = []
        if changes.missing:
            parts.append("missing now: " + ", ".join(sorted(changes.missing)))
        if changes.added:
            parts.append("not in the record: " + ", ".join(sorted(changes.added)))
        raise FlorError(
            "blocks-changed",
            f"{script}: SkipBlocks no longer match the record ({'; '.join(parts)}); "
            "replaying would restore state into the wrong code",
        )
    total = run.iterations
    index, count = options.segment
    if len(run.loops) > 1 and (count > 1 or options.iterations):
        raise FlorError(
            "several-loops",
            f"run {run.name}/{run.run_id} has {len(run.loops)} flor.it loops; "
            "segments and chosen iterations need a single main loop (replay it whole)",
        )
    committed = set(run.commits)
    start, stop = segment_bounds(total, count, committed)[index - 1]
    live = set(range(start, stop))
    if options.iterations:
        live &= parse_iterations(options.iterations, total)
    return ReplayPlan(
        make_plan(total, committed, live, run.complete),
        frozenset(live),
        changes.changed | changes.grown,
        changes.grown,
    )


class Replayer(Session):
    def __init__(self, options: Options) -> None:
        super().__init__(options)
        assert options.name
        self.run = runs.load_run(self.store, options.name, options.run_id)
        self.script = options.script or self.run.meta.get("script") or ""
        self.source = options.source if options.source is not None else read_script(self.script)
        decided = plan_replay(self.run, self.source, self.script, options)
        for name in sorted(decided.grown):
            self.warn_once(
                f"grown:{name}",
                f"block {name!r} now carries state the record does not have; re-executing it",
            )
        self.probed = decided.probed
        self.live = set(decided.live)
        self.plan = decided.plan
        self.replay_id = options.replay_id or runs.new_id()
        self.stdout = TaggedStream(sys.stdout, keep=True)
        self.stderr = TaggedStream(sys.stderr, keep=False)
        sys.stdout, sys.stderr = self.stdout, self.stderr
        self.loader = CheckpointLoader(self.store, self._expected_reads())
        self._restoring: Any = None
        self._closed = False
        atexit.register(self.close)

    def _expected_reads(self) -> list[dict[str, Any]]:
        reads = []
        for g in sorted(self.run.commits):
            if self.plan.action(g) == DEAD:
                continue
            for block, entry in self.run.commits[g]["blocks"].items():
                if g in self.plan.entries or block.rsplit("/", 1)[0] not in self.probed:
                    reads.append(entry)
        return reads

    # -- the main loop ---------------------------------------------------------------
    def main_loop(self, iterable: Any) -> Iterator[Any]:
        loop, first = self.loops, self.next_iteration
        self.loops += 1
        if loop == 0:
            self._match_numerics()
        if loop < len(self.run.loops):
            count = self.run.loops[loop]["count"]
        else:
            count = max(self.run.iterations - first, 0)
        iterator, is_while = as_iterator(iterable)
        try:
            for g in range(first, first + count):
                if g > self.plan.last_live:
                    self._stop()
                action = self.plan.action(g)
                if action == DEAD:
                    if not is_while and next(iterator, _END) is _END:
                        return
                    self.next_iteration += 1
                    continue
                value = next(iterator, _END)
                if value is _END:
                    return
                self.begin_iteration(g)
                self.stdout.quiet = self.stderr.quiet = action == QUIET
                self.stdout.bucket = str(g)
                yield value
                self.end_iteration()
            if first + count - 1 >= self.plan.last_live and not self.plan.natural_end:
                self._stop()
        finally:
            if not self._closed:
                self.stdout.quiet = self.stderr.quiet = False
                self.stdout.bucket = "post"

    def _stop(self) -> None:
        """Past the last iteration to show: what follows ran from another state."""
        self.stdout.quiet = self.stderr.quiet = True
        raise SystemExit(0)

    def _match_numerics(self) -> None:
        import torch

        recorded = self.run.meta.get("numerics", {})
        if recorded.get("threads") and torch.get_num_threads() != recorded["threads"]:
            torch.set_num_threads(recorded["threads"])
        if recorded.get("deterministic") is not None:
            torch.use_deterministic_algorithms(recorded["deterministic"])
        now = numeric_environment()
        for fact in ("torch", "cuda"):
            if fact in recorded and recorded[fact] != now[fact]:
                self.warn_once(
                    fact,
                    f"recorded with {fact}={recorded[fact]}, replaying with {now[fact]}: "
                    "printed digits may differ from the recording's",
                )

    # -- blocks ----------------------------------------------------------------------
    def block_start(self, name: str, probed: bool) -> bool:
        _, occurrence = self.open_block(name)
        g = self.iteration
        if g is None:
            return True
        entry = self.run.commits.get(g, {}).get("blocks", {}).get(f"{name}/{occurrence}")
        must_restore = g in self.plan.entries
        if entry is None and must_restore:
            raise FlorError(
                "missing-checkpoint",
                f"iteration {g} has no checkpoint of block {name!r} to start from; replay the whole run",
            )
        if entry is None or (not must_restore and (probed or name in self.probed)):
            return True
        try:
            self._restoring = self.loader.get(entry)
        except CorruptCheckpoint as e:
            if must_restore:
                raise
            self.warn_once(f"corrupt:{g}:{name}", f"{e}; re-executing block {name!r}")
            return True
        # An unchanged block run from the recorded state prints what it printed then.
        self.stdout.write(self.run.commits[g].get("stdout", {}).get(f"{g}:{name}/{occurrence}", ""))
        return False

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], scope: Scope
    ) -> tuple[Any, ...]:
        name, _ = self.close_block()
        tree, self._restoring = self._restoring, None
        if tree is None:
            return (*objs, *named.values())
        recorded = tree.get("named", {})
        if len(tree["objs"]) != len(objs) or not set(named) <= set(recorded):
            raise FlorError(
                "block-mismatch",
                f"SkipBlock.end for {name!r} does not take the values the record has "
                f"({len(objs)} + {sorted(named)} now, {len(tree['objs'])} + {sorted(recorded)} recorded)",
            )
        done: dict[int, Any] = {}
        restored = tuple(restore(o, node, done) for o, node in zip(objs, tree["objs"]))
        restored += tuple(restore(v, recorded[k], done) for k, v in named.items())
        now = stateful_in_scope(scope())
        for path, node in tree.get("scope", {}).items():
            if path in now:
                restore(now[path], node, done)
        restore_rng(tree["rng"])
        return restored

    def log(self, name: str, value: Any, step: int | None) -> None:
        if not self.stdout.quiet:
            super().log(name, value, step)

    # -- the end -------------------------------------------------------------------
    def close(self) -> None:
        """Store what this segment printed and logged, beside (never over) the record."""
        if self._closed:
            return
        self._closed = True
        self.loader.close()
        index, count = self.options.segment
        prefix = f"{self.run.prefix}/replays/{self.replay_id}"
        result = {
            "run_id": self.run.run_id,
            "segment": [index, count],
            "iterations": sorted(self.live),
            "probed": sorted(self.probed),
            "output": self.stdout.text(),
            "logs": self.logs,
            "finished": time.time(),
        }
        runs.put_json(self.store, f"{prefix}/segment-{index}-of-{count}.json", result)
        self.store.put(f"{prefix}/source.py", self.source.encode())
        sys.stdout.flush()
        self.upload_failed = not flush_store(self.store)


_END = object()
