"""Replay mode: re-run the edited script, restoring checkpoints instead of training."""

from __future__ import annotations

import atexit
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, NoReturn

from flor import runs
from flor.errors import CorruptCheckpoint, FlorError
from flor.inputs import read_script
from flor.replay import standin
from flor.replay.costs import RestoreCost
from flor.replay.decide import CHEAPER, CORRUPT, BlockAction, block_action
from flor.replay.loader import CheckpointLoader
from flor.replay.plan import (
    DEAD,
    ECHO,
    LIVE,
    QUIET,
    REBUILD,
    Plan,
    ReplayPlan,
    plan_replay,
    replan,
)
from flor.replay.restoring import label, restore_block
from flor.replay.tally import ReplayTally
from flor.replay.verify import first_difference, recorded_nodes, state_nodes, torch_rng_matches
from flor.replay.world import needs_world, replay_world
from flor.runs import layout
from flor.runs.records import CheckpointEntry, SegmentResult
from flor.runtime.journal.conditions import lookup_in
from flor.runtime.journal.stdout_capture import Streams
from flor.runtime.loop.session import Session, as_iterator, numeric_environment
from flor.runtime.process.job import Job
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.runtime.state import settings
from flor.runtime.state.kinds import stateful_in_scope
from flor.runtime.state.restore import CannotRestore
from flor.runtime.state.scope import Frame, bind, unbound, visible_names
from flor.runtime.state.unbound import UNBOUND
from flor.runtime.trackers import Ledger
from flor.sources import project_sources
from flor.store import Store
from flor.transform.hindsight import loop_assigned, loop_file


class Replayer(Session):
    trackers: Ledger

    def __init__(
        self,
        options: Options,
        store: Store,
        reporter: Reporter,
        streams: Streams,
        job: Job | None = None,
        recorded: runs.RecordedRun | None = None,
    ) -> None:
        """``streams``: stdout and stderr, tagged (released at close); ``job``: the job this
        process is a rank of (None: torchrun's, if any); ``recorded``: the run, where whoever
        starts the replay loaded it already (None: loaded here)."""
        super().__init__(options, store, reporter)
        if recorded is None:
            recorded = runs.load_run(self.store, options.name, options.run_id)
        self._enter_world(recorded, job)
        self.script = options.script or self.run.meta.script or ""
        self.source = options.source if options.source is not None else read_script(self.script)
        decided = plan_replay(
            self.run, self.source, self.script, options, self.world.in_step, lookup=None
        )
        if decided.lacking:
            first = min(decided.lacking)
            self.warn_once(
                "lacking",
                f"{len(decided.lacking)} of {len(self.run.commits)} checkpoints lack values the "
                f"edited script reads (iteration {first}: {decided.lacking[first]}); "
                "replay re-executes from the checkpoints that hold them",
            )
        self.probed = decided.probed
        # Only these are rebound from a checkpoint; what the loop never assigns (a timer set
        # before it) keeps this process's value. None: unknown, rebind every saved value.
        files = project_sources(options.project, self.script, self.source)
        where = loop_file(files, self.script)
        self.rebound = loop_assigned(files[where], where) if len(self.run.loops) <= 1 else None
        self.usable = decided.usable
        self.ends = decided.ends
        # The ranks of a job must agree on what runs (collectives), a stand-in runs nothing.
        always = options.restore_always or self.run.meta.world_size > 1
        self.restore_cost = RestoreCost(self.run.meta, always)
        self.replay_id = options.replay_id or runs.new_id()
        self.trackers = Ledger.replaying(
            self.run.meta.trackers, self._unshown, self.replay_id, lambda: self.iteration
        )
        self.streams, self.stdout, self.stderr = streams, streams.stdout, streams.stderr
        self.tally = ReplayTally()
        # A sparse plan is final once the loop starts: its conditions may read names then bound.
        sparse = decided.hindsight is not None and decided.hindsight.sparse
        self._decided: ReplayPlan | None = decided if sparse else None
        self._adopt(decided, final=self._decided is None)
        self._restoring: Any = None
        self.refused: set[str] = set()  # checkpoints found corrupt or forged
        self._restore_started = 0.0
        self._checking: CheckpointEntry | None = None
        self._closed = False
        self.hands_over = False  # set by restore_up_to: a recording takes the loop over
        atexit.register(self.close)

    def _enter_world(self, recorded: runs.RecordedRun, job: Job | None) -> None:
        """Which recorded rank this process replays, and how (in step, or standing in)."""
        self.world = replay_world(recorded.meta, job, self.options.rank)
        self.run = runs.as_rank(recorded, self.world.rank)
        if self.world.standin:
            standin.install(self.world, self._refuse_collective)
        elif self.world.in_step and self.world.rank == 0:
            self.reporter.say(
                f"replaying the {self.world.world_size} ranks in step: each runs the "
                "iterations any of them needs"
            )
        self.job = job if self.world.in_step else None

    def _unshown(self) -> bool:
        """Whether what runs now is not this segment's to show: a quiet iteration, or the
        code before (after) the loop in a segment other than the first (last)."""
        if self.stdout.quiet:
            return True
        index, count = self.options.segment
        if self.iteration is not None:
            return False
        return index > 1 if self.loops == 0 else index < count

    # -- a resumed recording's start ----------------------------------------------------
    def restore_up_to(self, at: int) -> None:
        """Replay only up to iteration ``at``, restored from its checkpoint without output,
        then hand the loop over (``release``) instead of ending the process."""
        actions = (DEAD,) * at + (QUIET,)
        plan = Plan(actions, frozenset({at}), natural_end=False)
        self._decided, self.hands_over = None, True
        self._adopt(replace(self.decided, plan=plan, live=frozenset(), verify=frozenset()), True)

    def release(self) -> None:
        """Done with the iterations a resumed recording restores: this session ends quietly
        (no replay record), the streams back as they were."""
        self._closed = True
        atexit.unregister(self.close)
        self.loader.close()
        self.streams.release()

    def _adopt(self, decided: ReplayPlan, final: bool) -> None:
        """Follow ``decided``; prefetch its checkpoints and say how it replays once ``final``."""
        self.decided = decided
        self.live = set(decided.live)
        self.plan = decided.plan
        self.verify_at = decided.verify
        self.loader = CheckpointLoader(self.store, self._expected_reads() if final else [])
        if final:
            if self.world.standin:
                self._check_restores_only(decided)
            self._say_how(decided)

    def _check_restores_only(self, decided: ReplayPlan) -> None:
        """A stand-in replays exactly only what it restores: refuse, before anything runs,
        a plan in which some block re-executes."""
        for g, action in enumerate(decided.plan.actions):
            if action in (DEAD, ECHO) or g in decided.plan.entries:
                continue
            if decided.probed:
                self._refuse_execution(g, f"the edit changes block {sorted(decided.probed)[0]!r}")
            if g not in decided.usable or g in decided.verify:
                self._refuse_execution(g, "it has no checkpoint")

    def _refuse_execution(self, g: int, why: str) -> NoReturn:
        raise needs_world(self.world, self.run.name, f"iteration {g} re-executes its step ({why})")

    def _refuse_collective(self, name: str) -> NoReturn:
        where = f" in iteration {self.iteration}" if self.iteration is not None else ""
        raise needs_world(
            self.world,
            self.run.name,
            f"the script calls torch.distributed.{name}{where} outside the restored blocks",
        )

    def _say_how(self, decided: ReplayPlan) -> None:
        """Once: why a replay runs every iteration where a sparse one was expected."""
        hindsight, needed = decided.hindsight, decided.needed
        for damage in self.run.damaged:
            self.warn_once(damage, f"{damage}: the iterations it recorded re-execute")
        if hindsight is not None and not hindsight.sparse and not hindsight.expected:
            self.warn_once("dense", f"replaying every iteration: {hindsight.dense}")
        elif needed is not None and needed.reason:
            self.warn_once("dense", f"replaying every iteration: {needed.reason}")
        elif needed is not None and needed.unknown and not self.run.damaged:
            self.warn_once(
                "unknown",
                f"{needed.unknown} iterations replay because the record does not hold the "
                "values their conditions read (recorded by an older flor?)",
            )

    def _replan_with(self, decided: ReplayPlan, frame: Frame) -> None:
        self._decided = None
        self.loader.close()
        lookup = lookup_in(visible_names(frame))
        agree = self._needed_by_any_rank if self.job is not None else None
        self._adopt(replan(self.run, decided, self.options.verify, lookup, agree), final=True)

    def _needed_by_any_rank(self, mine: set[int]) -> set[int]:
        """The union of every rank's needed iterations, through the job's store: the ranks'
        steps hold collectives, so all of them must run the same iterations."""
        job = self.job
        assert job is not None
        key = f"replay/{self.replay_id}/{self.options.segment[0]}/needed"
        job.share(f"{key}/{job.rank}", json.dumps(sorted(mine)))
        union: set[int] = set()
        for rank in range(job.world_size):
            union.update(json.loads(job.wait(f"{key}/{rank}")))
        return union

    def _expected_reads(self) -> list[CheckpointEntry]:
        reads = []
        for g in sorted(self.usable):
            if self.plan.action(g) == DEAD:
                continue
            if g not in self.plan.entries and not self._restore_pays(g):
                continue
            for block, entry in self.run.commits[g].blocks.items():
                if g in self.plan.entries or block.rsplit("/", 1)[0] not in self.probed:
                    reads.append(entry)
        return reads

    def _restore_pays(self, g: int) -> bool:
        return self.restore_cost.pays(self.run.block_timings.get(g))

    # -- the main loop ---------------------------------------------------------------
    def main_loop(self, iterable: Any) -> Iterator[Any]:
        loop, first = self.loops, self.next_iteration
        self.loops += 1
        if loop == 0:
            self._match_numerics()
            if self._decided is not None:
                self._replan_with(self._decided, sys._getframe(1))  # the user's loop frame
        if loop < len(self.run.loops):
            count = self.run.loops[loop].count
        else:
            count = max(self.run.iterations - first, 0)
        iterator, is_while = as_iterator(iterable)
        try:
            for g in range(first, first + count):
                if g > self.plan.last_live:
                    if self.hands_over:  # a resumed recording goes on from here
                        return
                    self._stop()
                action = self.plan.action(g)
                # A recorded pass of a `while` loop is known to happen: its condition is not
                # evaluated (after skipped iterations it would read stale state).
                value = g - first if is_while else next(iterator, _END)
                if value is _END:
                    return
                if action in (DEAD, ECHO):
                    if action == ECHO:
                        self._echo(g)
                    self.next_iteration += 1
                    continue
                self.begin_iteration(g)
                quiet = action != LIVE
                if action == REBUILD:
                    self._echo(g, run=True)
                self.stdout.quiet = self.stderr.quiet = quiet
                self.stdout.bucket = g
                self.tally.begin(quiet)
                yield value
                self.tally.end(g)
                self.end_iteration()
            if first + count - 1 >= self.plan.last_live and not self.plan.natural_end:
                if self.hands_over:
                    return
                self._stop()
        finally:
            if not self._closed:
                self.stdout.quiet = self.stderr.quiet = False
                self.stdout.bucket = "post"

    def _echo(self, g: int, run: bool = False) -> None:
        """Print what iteration ``g`` printed when recorded: the edit does not run in it
        (``run``: it runs, quietly, to rebuild state from stale values)."""
        self.stdout.quiet = self.stderr.quiet = False
        self.stdout.bucket = g
        self.stdout.write(self.run.stdout.get(str(g), ""))
        self.stderr.write(self.run.stderr.get(str(g), ""))
        self.tally.echoed += not run

    def _stop(self) -> None:
        """Past the last iteration to show: what follows ran from another state."""
        self.stdout.quiet = self.stderr.quiet = True
        raise SystemExit(0)

    def _match_numerics(self) -> None:
        import torch

        recorded = self.run.meta.numerics
        threads = self.options.threads or recorded.get("threads")
        if threads and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if self.options.threads and recorded.get("threads") not in (None, threads):
            self.warn_once(
                "threads",
                f"replaying with {threads} torch threads, recorded with {recorded['threads']}: "
                "sums may round differently, so printed digits can differ from the record's",
            )
        deterministic = recorded.get("deterministic")
        if (
            deterministic is not None
            and deterministic != torch.are_deterministic_algorithms_enabled()
        ):
            torch.use_deterministic_algorithms(deterministic)  # imports torch._dynamo: 1 s
        now = numeric_environment()
        for fact in ("torch", "cuda"):
            if fact in recorded and recorded[fact] != now[fact]:
                self.warn_once(
                    fact,
                    f"recorded with {fact}={recorded[fact]}, replaying with {now[fact]}: "
                    "printed digits may differ from the recording's",
                )

    # -- blocks ----------------------------------------------------------------------
    def block_start(self, name: str, probed: bool, frame: Frame | None) -> bool:
        frame = frame or sys._getframe(2)
        _, occurrence = self.open_block(name)
        g = self.iteration
        if g is None:
            return True
        commit = self.run.commits.get(g)
        recorded = commit.blocks.get(f"{name}/{occurrence}") if commit is not None else None
        must_restore = g in self.plan.entries
        if recorded is not None:  # an edited journal entry may point at another block's
            own = layout.ckpt_key(self.run.prefix, g, name, occurrence)
            if recorded.key != own:
                forged = CorruptCheckpoint(own, f"its journal entry points at {recorded.key}")
                if must_restore:
                    raise forged
                self.warn_once(f"corrupt:{own}", f"{forged}; re-executing block {name!r}")
                recorded = None
        usable = recorded is not None and g in self.usable
        if must_restore and not usable:
            raise FlorError(
                "missing-checkpoint",
                f"iteration {g} has no checkpoint of block {name!r} to start from; replay the whole run",
            )
        action = block_action(
            must_restore,
            recorded is not None,
            usable,
            probed or name in self.probed,
            g in self.verify_at,
            self._restore_pays(g),
        )
        if action.why == CHEAPER:  # its state is current: it runs, and is not checked
            self.tally.block(name, CHEAPER)
            return True
        if action.restore and recorded is not None and not self._load(g, name, recorded):
            action = BlockAction(False, CORRUPT)
        if not action.restore:
            if self.world.standin:
                self._refuse_execution(g, f"block {name!r} cannot be restored")
            self.tally.block(name, action.why)
            if recorded is not None and recorded.key not in self.refused:
                self._checking = recorded  # the state it ends in must be the recorded one
            return True
        self.tally.block(name, "")
        # An unchanged block run from the recorded state prints what it printed then.
        key = f"{g}:{name}/{occurrence}"
        self.stdout.write(self.run.commits[g].stdout.get(key, ""))
        self.stderr.write(self.run.commits[g].stderr.get(key, ""))
        end = self.ends.get(name)
        if end is not None:  # `end(model, loss)` must evaluate although the block did not bind loss
            bind(frame, dict.fromkeys(unbound(frame, end.variables), UNBOUND))
        return False

    def _load(self, g: int, name: str, entry: CheckpointEntry) -> bool:
        """Load the checkpoint to restore at the block's end; False (re-execute) if corrupt."""
        self._restore_started = time.perf_counter()
        try:
            self._restoring = self.loader.get(entry)
        except CorruptCheckpoint as e:
            if g in self.plan.entries:
                raise
            self.refused.add(entry.key)  # nor is it what a re-executed block is checked against
            self.warn_once(f"corrupt:{entry.key}", f"{e}; re-executing block {name!r}")
            return False
        return True

    def _check(
        self,
        name: str,
        entry: CheckpointEntry,
        objs: tuple[Any, ...],
        named: dict[str, Any],
        frame: Frame,
    ) -> Any:
        """Compare the state a re-executed block ended in with its checkpoint (``verify``);
        the checkpoint's tree where they differ, so that the replay goes on from the record."""
        end = self.ends.get(name)
        labels = [label(end.positional if end else (), i) for i in range(len(objs))]
        try:
            tree = self.loader.get(entry)
        except CorruptCheckpoint as e:
            self.warn_once(f"corrupt:{entry.key}", f"{e}; not verified")  # said once
            return None
        scope = stateful_in_scope(visible_names(frame))
        live = state_nodes(objs, named, scope, labels)
        differs = first_difference(live, recorded_nodes(tree, labels))
        if differs is None and not torch_rng_matches(tree["rng"]):
            differs = "the torch random generator"
        g = self.iteration
        self.tally.checked.append((g, name, differs))
        if differs is not None:
            self.warn_once(
                f"differs:{name}",
                f"iteration {g}: block {name!r} re-executed to a state that differs from the "
                f"record in {differs} (a nondeterministic op, an unseeded generator, data loader "
                "workers?): hindsight values may not be what the recorded run saw",
            )
            return tree if g in self.usable else None  # a usable one goes on from the record
        return None

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame | None
    ) -> tuple[Any, ...]:
        frame = frame or sys._getframe(2)
        name, _ = self.close_block()
        tree, self._restoring = self._restoring, None
        checking, self._checking = self._checking, None
        skipped = tree is not None
        if tree is None and checking is not None:
            tree = self._check(name, checking, objs, named, frame)  # differs: restore the record
        if tree is None:
            return (*objs, *named.values())
        if len(tree["objs"]) != len(objs):
            raise FlorError(  # the plan checked the journal; this checkpoint disagrees with it
                "block-mismatch",
                f"SkipBlock.end for {name!r} takes {len(objs)} positional values, "
                f"the checkpoint of iteration {self.iteration} holds {len(tree['objs'])}",
            )
        try:
            end = self.ends.get(name)
            positional = end.positional if end is not None else ()
            restored = restore_block(tree, objs, named, frame, positional, self.rebound)
        except CannotRestore as e:
            raise FlorError(
                e.slug,
                f"iteration {self.iteration}, block {name!r}: {e.message}; run this block "
                "instead of restoring it by changing a line inside it (it is then probed)",
            ) from None
        meta = self.run.meta
        if self.iteration == meta.forked_at and meta.fork_settings:  # as the fork went on
            settings.apply(settings.in_scope(frame), meta.fork_settings)
        if skipped:
            self.restore_cost.measured(time.perf_counter() - self._restore_started)
        return restored

    def log(self, name: str, value: Any, step: int | None) -> None:
        if not self.stdout.quiet:
            super().log(name, value, step)

    def where(self) -> str | None:
        """Where the replay was, for an exception the user's code raised."""
        if self.iteration is None or self.tally.last_block is None:
            return None if self.iteration is None else f"replaying iteration {self.iteration}"
        name, why = self.tally.last_block
        how = "re-executed" if why else "restored from its checkpoint"
        return f"replaying iteration {self.iteration}, after block {name!r} was {how}"

    # -- the end -------------------------------------------------------------------
    def close(self, exit_status: int | None = None) -> None:
        """Store what this segment printed and logged, beside (never over) the record."""
        if self._closed:
            return
        self._closed = True
        self.loader.close()
        index, count = self.options.segment
        result = SegmentResult(
            run_id=self.run.run_id,
            segment=(index, count),
            iterations=tuple(sorted(self.live)),
            probed=tuple(sorted(self.probed)),
            output=self.stdout.text(),
            logs=tuple(self.logs),
            finished=time.time(),
            diverged=self.tally.diverged(),
            reexecuted=self.tally.why,
            sent=self.trackers.sent(),
            stderr=self.stderr.text(),
        )
        key = layout.segment_key(self.run.prefix, self.replay_id, index, count)
        layout.put_json(self.store, key, result.to_json(), compact=True)  # an output per iteration
        self.store.put(
            layout.replay_source_key(self.run.prefix, self.replay_id), self.source.encode()
        )
        sys.stdout.flush()
        if self.tally.iterations or self.tally.echoed:
            self.stderr.quiet = False
            self.reporter.say(self.tally.summary())
        sent = self.trackers.said()
        if sent:
            self.stderr.quiet = False
        for line in sent:
            self.reporter.say(line)
        self.diverged = result.diverged
        self.result = result
        self.upload_failed = not self.flush_store()
        self.streams.release()


_END = object()
