"""Record mode: run the script as usual, checkpointing blocks adaptively.

The recorder decides; the pieces do: ``IterationClock`` keeps time,
``CheckpointPolicy`` spends the budget, ``Checkpointer`` takes a block's
checkpoint, ``BackgroundWriter`` writes it (off the training thread, unless it is
small) and charges what that cost,
``RunJournal`` commits it and ``Thinning`` says which to delete again when
the checkpoints outgrow the storage budget.

Under torchrun every rank records: one run id, agreed through the launcher's
store (``Job``), and a journal per rank. Rank 0's policy decides which
iterations are checkpointed and the others follow it, so every rank holds a
checkpoint of the same iterations and a restore is consistent. It decides one
iteration ahead, so that the decision has reached the other ranks by the time
they need it, and none of them waits for it. State the ranks share (a DDP
model, its optimizer) has the same bytes on every rank, so its tensor blobs are
stored once; what is each rank's own (RNG streams, the sampler's position,
rank-local values) is in its own checkpoint.
"""

from __future__ import annotations

import atexit
import functools
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from flor.runs import layout, retention
from flor.runs.records import Commit, LoopEnd, RunMeta
from flor.runtime.checkpoints.checkpointer import Checkpointer, Written
from flor.runtime.checkpoints.clock import IterationClock, process_age
from flor.runtime.checkpoints.interference import Interference, spare_core
from flor.runtime.checkpoints.policy import CheckpointPolicy, Decision
from flor.runtime.checkpoints.thinning import Dropped, Piece, Thinning
from flor.runtime.checkpoints.writer import BackgroundWriter
from flor.runtime.journal.conditions import Lookahead, lookup_frame
from flor.runtime.journal.loop_scalars import LoopScalars
from flor.runtime.journal.run_journal import RunJournal
from flor.runtime.journal.stdout_capture import CURRENT, Streams
from flor.runtime.loop.identity import ForkPoint, forked_meta, new_meta, resumed_meta
from flor.runtime.loop.session import Session, as_iterator, numeric_environment
from flor.runtime.process.job import Feed, Job
from flor.runtime.process.options import Options
from flor.runtime.process.reporter import Reporter
from flor.runtime.state import settings
from flor.runtime.state.capture import Unrestorable
from flor.runtime.state.scope import Frame
from flor.runtime.trackers import Ledger
from flor.store import Store

DECISIONS_KEPT = 1000  # iterations' checkpoint decisions a job's store holds at once
RESERVE_BYTES = 1 << 20  # disk set aside for the journal's last entries once the disk is full
# Iterations whose timings, output and counters wait in memory for a commit: after this many
# without a checkpoint, they are journaled on their own (a commit without blocks), once the
# writer has finished the previous commit: on steps of a few microseconds it cannot keep up
# with one per 1000 (it needs the GIL the loop holds), and would lag behind the loop's end.
JOURNAL_EVERY = 1000
JOURNAL_RETRY = 64  # iterations until a journal entry that waits for the writer asks again


class Recorder(Session):
    trackers: Ledger

    def __init__(
        self,
        options: Options,
        store: Store,
        reporter: Reporter,
        streams: Streams,
        lookahead: Lookahead | None = None,
        watched: frozenset[str] | None = None,
        job: Job | None = None,
        continues: RunMeta | None = None,
        fork: ForkPoint | None = None,
    ) -> None:
        """``streams``: stdout and stderr, tagged (released at close); ``lookahead``: the loop's own
        periodic tests, where checkpoints are preferred; ``watched``: the loop's counters,
        noted (None: any int or bool); ``job``: this process's (None: torchrun's, if any);
        ``continues``: the run this one goes on with, after ``options.resume_from``; ``fork``:
        the other run's checkpoint this new one goes on from."""
        super().__init__(options, store, reporter)
        self.job = job  # of a torchrun or mp.spawn job: its rank (launch.start reads it)
        self._alone = self.job is None  # no ranks to decide checkpoints in step with
        proposed = continues.run_id if continues is not None else layout.new_id()
        self.run_id = self.job.agree("run", proposed) if self.job else proposed
        self.rank = self.job.rank if self.job else 0
        self.prefix = layout.rank_prefix(layout.run_prefix(options.name, self.run_id), self.rank)
        self.lookahead = lookahead
        self.policy = CheckpointPolicy(options.epsilon, periodic=lookahead is not None)
        store.hold_reserve(RESERVE_BYTES)
        self.writer = BackgroundWriter(
            self._writer_cost, reporter.warn, on_full=store.release_reserve
        )
        self.thinning = Thinning(options.storage)
        self.journal = RunJournal(store, self.prefix)
        self.checkpointer = Checkpointer(store, self.prefix, self.writer)
        self.clock = IterationClock()
        self.scalars = LoopScalars(watched)
        self.stalls: list[float] = []  # training-thread seconds per checkpointed block
        self.skipped_behind = 0  # checkpoints the writer had no room for (``_checkpoint``)
        self.written: list[Future[Written]] = []
        self._checkpointing: Decision | None = None  # decided at the iteration's first block end
        self._fast = False  # the open iteration surely takes no checkpoint (_turn)
        self._fast_until, self._fast_compute = 0, 0.0  # until then, later ones too
        # known at the first loop: the writer is then charged what training lost, else its CPU
        self._spare_core = False
        self.interference, self._watching = Interference(), False  # (``_watch``)
        self._in_flight = -1  # the newest checkpoint handed to the writer since it was idle
        self._unrestorable = False  # some block's state cannot be saved: never checkpoint
        self._points = 0  # iterations decided so far (those with a block end)
        self._ahead = Decision.TAKE  # rank 0 in a job: the next one's decision (the first: taken)
        self._feed: Feed | None = None  # other ranks: rank 0's decisions, read ahead
        self._blocks: dict[str, Future[Written]] = {}  # the open iteration's checkpoints
        self._journal_at = JOURNAL_EVERY - 1  # from its end, journal without a checkpoint
        self._committed: Future[Any] = Future()  # the last commit submitted
        self._committed.set_result(None)
        self._closed = False
        self._left = False  # the last loop was left before its end
        self._begin(continues, fork)
        self._alive = self.journal.keep_alive()
        self.streams = streams
        self.stdout, self.stderr = streams.stdout, streams.stderr  # kept per iteration
        atexit.register(self.close)

    def _begin(self, continues: RunMeta | None, fork: ForkPoint | None) -> None:
        """The run's metadata and sources: a new run's (a fork's begins with its parent's
        checkpoint), or those of the run it continues after iteration ``resume_from`` (what
        it journaled past that is dropped: this recording journals those iterations again;
        its sources stay)."""
        options = self.options
        self.trackers = Ledger.recording()  # (a resumed run's: its Resumer's, from its start)
        if continues is None:
            if fork is None:
                self.meta = new_meta(options, self.run_id, self.rank, self.job)
            else:
                self.meta = forked_meta(options, self.run_id, fork)
            self.journal.start(self.meta, self._read_source(), options.original, options.project)
            if fork is not None:
                self.journal.adopt(fork.commit)
                self.next_iteration = fork.at + 1
            return
        after = options.resume_from or 0
        self.meta = resumed_meta(continues, options, after)
        self.journal.drop_after(after)
        self.journal.write_meta(self.meta)
        self.next_iteration = after + 1

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
    def main_loop(self, iterable: Any, depth: int = 1) -> Iterator[Any]:
        """``depth``: how far up the user's loop frame is (2: under a resumed run's)."""
        loop, first = self.loops, self.next_iteration
        if self.options.resume_from is not None and loop == 0:
            first = 0  # the loop the run began: its iterations so far are restored, not run
        self.loops += 1
        if loop == 0:  # the trackers opened so far: a killed run's replay still finds them
            self.meta = self.meta.updated(
                numerics=numeric_environment(), trackers=self.trackers.to_json()
            )
            if self.meta.settings is None:  # as the script set them up: a fork compares them
                self.meta = self.meta.updated(
                    settings=settings.of(settings.in_scope(sys._getframe(depth)))
                )
            self._spare_core = spare_core(self.meta.numerics["threads"])
            self.journal.write_meta(self.meta)
            self._allow_startup(iterable)
        iterator, _ = as_iterator(iterable)
        # what the bucket ``CURRENT`` is (after the loop's last iteration: the loop's end)
        self.stdout.current = lambda: "post" if self.iteration is None else self.iteration
        frame = sys._getframe(depth)  # the frame running the ``for``: it resumes us each time
        scope = frame.f_code.co_name
        status = "closed"  # break, or an exception in the loop body, closes the generator
        try:
            for value in iterator:
                self._turn(value, frame, scope)
                yield value
            status = "exhausted"
        finally:
            if self.iteration is not None:  # the last iteration, or one the consumer left
                self._open_block = None  # left from inside a block (an exception): no end
                start = time.perf_counter()
                self._end(self.iteration, start)
                self.policy.bookkeeping += time.perf_counter() - start
            self.stdout.bucket = "post"
            self._end_loop(loop, first, status)

    def _allow_startup(self, iterable: Any) -> None:
        """Tell the policy the script's own start-up (the process's age, less flor's) and the
        main loop's length: its ``len()``, else what the newest finished run of this
        experiment and script ran (a ``count()`` or while loop most likely runs about as long
        again), else not known (0)."""
        try:
            length = len(iterable)
        except Exception:  # a generator, a while condition
            length = self.journal.previous_length(self.options.name, self.options.script)
        self.policy.allow_startup(process_age() - self.policy.fixed, max(length, 0))

    def _turn(self, value: Any, loop_frame: Frame, scope: str) -> None:
        """End the open iteration and begin the next (``loop_frame``: the frame running the
        ``for`` over ``flor.it``). One clock read ends the one and starts flor's own time: an
        iteration's time runs until its successor's value is ready (a batch loaded is
        training), and flor's from there until the body starts (the generator's resumption
        too). Every iteration passes here, so it reads the clock twice, not four times.

        An iteration the policy surely skips (most iterations of a loop of short steps) is
        *fast*: its blocks are neither timed nor their output kept apart, which only a
        checkpoint's restore needs. Its block ends then take no checkpoint, even where
        training crossed into the budget meanwhile: the next iteration decides."""
        now = time.perf_counter()
        g = self.iteration
        if g is None or not self._fast or g >= self._journal_at or self._open_block is not None:
            self._full_turn(g, now, value, loop_frame, scope)
            return
        # The fast lane: ``g`` took no checkpoint and journals later. What ``advance`` and
        # ``clock.turn`` do, inline: their calls were a third of an empty step's bookkeeping.
        if self._watching and self.writer.idle:
            self._charge_interference()
        clock = self.clock
        elapsed = now - clock.iteration_start
        clock.compute += elapsed
        clock.timings[g] = elapsed
        self.iteration = self.next_iteration = iteration = g + 1
        append = self.scalars.append_offset
        if append is not None and type(value) is int:
            append(value - iteration)  # all a loop over ints without counters notes
        else:
            self.scalars.note(iteration, scope, loop_frame.f_locals, value)
        if iteration >= self._fast_until or clock.compute >= self._fast_compute:
            self._fast = self._surely_skips(clock.compute, iteration, loop_frame)
            if not self._fast:  # its blocks count their occurrences (fast ones left them)
                self._occurrences.clear()
        clock.iteration_start = start = time.perf_counter()
        self.policy.bookkeeping += start - now

    def _full_turn(
        self, g: int | None, now: float, value: Any, loop_frame: Frame, scope: str
    ) -> None:
        """The turn after an iteration that was not fast, or that journals: ``advance``, the
        clock's ``turn``, and the policy asked afresh."""
        if g is not None and (self._checkpointing and self._blocks or g >= self._journal_at):
            self.clock.end_iteration(g, now)  # before its journal entry takes the timings
            self._journal(g)
            g = None
        if self._watching and self.writer.idle:
            self._charge_interference()
        iteration = self.advance()
        self.scalars.note(iteration, scope, loop_frame.f_locals, value)
        self._checkpointing = None
        self.stdout.bucket = CURRENT  # this iteration, and the fast ones after it
        self._fast = self._alone and self._surely_skips(self.clock.compute, iteration, loop_frame)
        start = time.perf_counter()
        self.policy.bookkeeping += start - now
        self.clock.turn(g, now, start)

    def _surely_skips(self, compute: float, g: int, loop_frame: Frame) -> bool:
        """Whether the policy surely skips iteration ``g`` (the eve of a periodic iteration
        only where the lookahead foresaw none); the fast lane asks again only past the
        iteration and the training it surely skips below (``_fast_until``, ``_fast_compute``).
        Where the lookahead foresaw nothing from ``g`` on (a policy over budget asks it
        nothing), it is asked: else a wait for the budget ends at the first eve it missed."""
        policy = self.policy
        until, below = policy.skipping(compute, g, g + 1)  # sure on an eve too: over budget
        if until <= g:  # else sure only where no eve comes first
            lookahead = self.lookahead
            if lookahead is None:
                until, below = policy.skipping(compute, g)
            elif lookahead.quiet(g + 1) or not self._next_fires(g, loop_frame, 1):
                until, below = policy.skipping(compute, g, lookahead.quiet_until)
        self._fast_until, self._fast_compute = until, below
        return g < until

    def _writer_cost(self, iteration: int, seconds: float) -> None:
        """The writer's CPU time for a job of ``iteration`` (-1: the journal's): charged where
        no core is spare for it (else by ``_charge_interference``)."""
        if not self._spare_core:
            self.policy.charge(iteration, seconds)

    def _charge_interference(self) -> None:
        """The writer went idle: charge what its work cost training to the newest checkpoint
        it wrote meanwhile (or to journaling)."""
        lost = self.interference.end()
        self._watching = False
        if self._spare_core:
            self.policy.charge(self._in_flight, lost)
        self._in_flight = -1
        self._fast_until = 0  # what it wrote may have changed what the policy expects

    def _watch(self) -> None:
        """The writer got work: what it costs training is measured until it is idle again
        (``_watching``: the recorder's own flag, read every iteration, where the
        interference's would be one more object to load, cold, inside a training step)."""
        self.interference.begin()
        self._watching = True

    def _end(self, g: int, now: float) -> None:
        """Close iteration ``g`` at ``now``, the loop's last."""
        self.clock.end_iteration(g, now)
        self._journal(g)
        self.end_iteration()

    def _journal(self, g: int) -> None:
        """Iteration ``g`` ended: queue its commit if it was checkpointed, or the journal's
        entry once enough iterations wait for one."""
        blocks, self._blocks = self._blocks, {}
        if self._checkpointing and blocks:
            self._submit_commit(g, blocks, self._checkpointing == Decision.PREFERRED)
        elif g >= self._journal_at:
            # Ranks of a job journal at the same iterations: replay keeps only commits that
            # every rank has. Alone, a journal entry waits for the writer to catch up (it
            # needs the GIL the loop holds), asked again some iterations on.
            if self.job is not None or self._committed.done():
                self._submit_commit(g, {}, False)
            else:
                self._journal_at = g + JOURNAL_RETRY

    def _submit_commit(self, g: int, blocks: dict[str, Future[Written]], preferred: bool) -> None:
        """Queue the commit of iteration ``g``: after its data, which the writer wrote first."""
        timings, block_timings = self.clock.take()
        stdout, stderr = self.stdout.take_iterations(g), self.stderr.take_iterations(g)
        logs, self.logs = self.logs, []
        scalars = self.scalars.take()
        called = self.take_called()
        self._journal_at = g + JOURNAL_EVERY

        def commit() -> None:
            entries = {label: f.result().entry for label, f in blocks.items()}
            start = time.thread_time()
            changes = scalars.changes()
            commit = Commit(g, entries, stdout, timings, block_timings, changes, called, stderr)
            self.journal.commit(commit, logs)
            if blocks:
                # Journaling the iterations since the last entry is the journal's cost, not
                # g's: the policy learns what one more checkpoint costs.
                if not self._spare_core:  # (else no CPU time of the writer's was charged)
                    self.policy.move_to_journaling(g, time.thread_time() - start)
                self.policy.settle(g)  # the commit made g visible
                self._thin(g, [f.result() for f in blocks.values()], preferred)

        # A checkpoint's commit is charged to it; the others are the journal's (-1).
        self._committed = self.writer.submit(g if blocks else -1, commit, commit=bool(blocks))
        self._watch()
        self.written.extend(blocks.values())

    def _thin(self, g: int, written: list[Written], preferred: bool) -> None:
        """Iteration ``g`` is committed: delete what no longer fits the storage budget."""
        pieces = [
            Piece(w.entry.key, w.entry.bytes, dict(w.entry.blobs), w.created) for w in written
        ]
        self.thinning.add(g, pieces, preferred)
        for dropped in self._excess():
            self.checkpointer.chunks.forget(dropped.blobs)
            try:
                retention.drop_checkpoint(
                    self.store, self.prefix, dropped.iteration, dropped.keys, dropped.blobs
                )
            except Exception as e:  # the store refused: that data stays, training goes on
                self.warn_once("thinning", f"cannot thin checkpoint {dropped.iteration}: {e}")
        if len(self.thinning.kept) == 1 and self.thinning.thinned:
            self.warn_once(
                "storage",
                f"one checkpoint ({self.thinning.stored / 1e6:.1f} MB) fills the storage budget "
                f"({self.options.storage.text}): flor keeps only the latest; raise it with "
                "--storage (FLOR_STORAGE)",
            )

    def _excess(self) -> list[Dropped]:
        """What to thin now: what the budget cannot keep, or in a job what rank 0 thinned
        (so that every rank keeps the same iterations)."""
        job = self.job
        if job is None:
            return self.thinning.excess(self.clock.compute)
        if job.rank > 0:
            told = job.peek("thinned") or ""
            return self.thinning.follow(int(g) for g in told.split(",") if g)
        dropped = self.thinning.excess(self.clock.compute)
        for d in dropped:
            job.append("thinned", f"{d.iteration},")
        return dropped

    def _end_loop(self, loop: int, first: int, status: str) -> None:
        timings, block_timings = self.clock.take()
        stdout = self.stdout.take_iterations(self.next_iteration)
        stderr = self.stderr.take_iterations(self.next_iteration)
        end = LoopEnd(
            loop,
            first,
            self.next_iteration - first,
            status,
            stdout,
            timings,
            block_timings,
            self.scalars.take().changes(),
            self.take_called(),
            stderr,
        )
        logs, self.logs = self.logs, []
        self._journal_at = self.next_iteration - 1 + JOURNAL_EVERY
        self._left = status == "closed"  # by a break, or by an exception
        self.writer.submit(-1, lambda: self.journal.end_loop(end, logs))
        self.writer.flush()
        self._report()

    # -- blocks ----------------------------------------------------------------------
    def block_start(self, name: str, probed: bool, frame: Frame | None) -> bool:
        if self._fast and self._open_block is None:
            # A fast iteration restores nothing: its blocks need no occurrence (an iteration
            # that is not fast starts counting afresh), only the check that each ends.
            self._open_block = (name, -1)
            return True
        _, occurrence = self.open_block(name)
        if self.iteration is not None:
            self.stdout.bucket = (self.iteration, name, occurrence)  # replay re-prints it
        self.clock.begin_block(time.perf_counter())
        return True

    def block_end(
        self, objs: tuple[Any, ...], named: dict[str, Any], frame: Frame | None
    ) -> tuple[Any, ...]:
        if self._fast and self._open_block is not None:
            self._open_block = None
            return (*objs, *named.values()) if named else objs
        frame = frame or sys._getframe(2)
        block = self.close_block()
        g = self.iteration
        if g is None:
            return (*objs, *named.values()) if named else objs
        self.stdout.bucket = CURRENT
        start = time.perf_counter()
        compute = self.clock.end_block(g, start)
        first = self._checkpointing is None  # the iteration's first block end decides
        if first:  # surely not where the turn said so (it asked the policy, if it had to)
            skips = self._alone and g < self._fast_until and compute < self._fast_compute
            self._checkpointing = Decision.SKIP if skips else self._decide(compute, g, frame)
        charged = self._checkpoint(g, block, objs, named, frame) if self._checkpointing else 0.0
        if first and self.job is not None and self.job.rank == 0:
            self._decide_ahead(compute, g, frame)  # after the stall, which the policy learns
        own = time.perf_counter() - start
        self.clock.stalled(own)
        self.policy.bookkeeping += own - charged  # the checkpoint's time is charged to it
        return (*objs, *named.values())

    def _decide(self, compute: float, g: int, frame: Frame) -> Decision:
        """Whether iteration ``g`` is checkpointed: the policy's call, alone; in a job, what
        rank 0 decided one iteration ahead (every rank then knows it before it is needed)."""
        if self.job is None:
            decided = self.policy.decide(compute, g, self._periodic_ahead(g, frame, 1))
        elif self.job.rank == 0:
            decided = self._ahead
        elif self._points == 0:
            decided = Decision.TAKE  # as on rank 0: the first is always taken
        else:
            self._feed = self._feed or self.job.feed("checkpoint", start=1)
            decided = Decision(int(self._feed.get(self._points)))
        self._points += 1
        return Decision.SKIP if self._unrestorable or self.writer.full else decided

    def _decide_ahead(self, compute: float, g: int, frame: Frame) -> None:
        """Rank 0: decide the next iteration's checkpoint now, and tell the other ranks."""
        job = self.job
        assert job is not None
        ahead = self.policy.decide(compute, g + 1, self._periodic_ahead(g, frame, 2))
        self._ahead = Decision.SKIP if self._unrestorable else ahead
        job.publish(f"checkpoint/{self._points}", str(int(self._ahead)))
        if self._points >= DECISIONS_KEPT:  # ranks stay in step, far closer than this
            job.forget(f"checkpoint/{self._points - DECISIONS_KEPT}")

    def _periodic_ahead(self, g: int, frame: Frame, ahead: int) -> Callable[[], bool] | None:
        """Whether iteration ``g + ahead`` is one of the loop's periodic ones (then
        ``g + ahead - 1`` is the eve a checkpoint is preferred on); asked only when the
        policy could take a checkpoint."""
        if self.lookahead is None:
            return None
        return functools.partial(self._next_fires, g, frame, ahead)

    def _next_fires(self, g: int, frame: Frame, ahead: int) -> bool:
        lookahead = self.lookahead
        assert lookahead is not None
        if lookahead.quiet(g + ahead):  # foreseen: no need for the frame's values
            return False
        lookup = lookup_frame(frame.f_locals, frame.f_globals)
        return lookahead.next_fires(g, self.scalars.current, lookup, ahead)

    def _checkpoint(
        self,
        g: int,
        block: tuple[str, int],
        objs: tuple[Any, ...],
        named: dict[str, Any],
        frame: Frame,
    ) -> float:
        """Take the block's checkpoint; the seconds it took from training (its stall: the
        copies, and for a small one its serialization), charged to it. Skipped where the
        writer is too far behind to hold it (memory, not the budget, is short)."""
        if not self.checkpointer.fits(block):
            self.skipped_behind += 1
            self._checkpointing = Decision.SKIP
            self._blocks = {}
            return 0.0
        start = time.perf_counter()
        try:
            self._blocks[f"{block[0]}/{block[1]}"] = self.checkpointer.take(
                g, block, objs, named, frame
            )
            self._watch()
            self._in_flight = g
        except Unrestorable as e:
            self.warn_once(
                f"unrestorable:{block[0]}",
                f"block {block[0]!r} cannot be checkpointed: {e}; replay will re-execute it "
                "(every iteration, from the start)",
            )
            self._checkpointing = Decision.SKIP
            self._unrestorable = True
            self._blocks = {}
            return 0.0
        stall = time.perf_counter() - start
        self.stalls.append(stall)
        self.policy.charge(g, stall)
        return stall

    def charge_setup(self, seconds: float) -> None:
        """flor's own start-up before the script ran (``flor run``: instrumenting it)."""
        self.policy.charge_fixed(seconds)

    # -- the end -------------------------------------------------------------------
    def _bytes(self) -> tuple[int, int]:
        """What the kept checkpoints hold, and what they keep in the store."""
        kept = set(self.thinning.kept)
        ok = [f.result() for f in self.written if _succeeded(f)]
        logical = sum(w.logical for w in ok if w.iteration in kept)
        return logical, self.thinning.stored

    def _report(self) -> None:
        compute = self.clock.compute
        budgeted = self.policy.budgeted(compute, self.next_iteration - 1)
        overhead = self.policy.overhead(budgeted)
        logical, stored = self._bytes()
        thinned = self.thinning.thinned
        self.meta = self.meta.updated(
            iterations=self.next_iteration,
            checkpoints=self.policy.taken,
            thinned=thinned,
            checkpoint_bytes=logical,
            stored_bytes=stored,
            compute_seconds=round(self.clock.compute, 3),
            budgeted_seconds=round(budgeted, 3),
            overhead=round(overhead, 5),
            setup_seconds=round(self.policy.fixed, 3),
            bookkeeping_seconds=round(self.policy.bookkeeping + self.policy.journaling, 3),
            stall_seconds=tuple(round(s, 6) for s in self.stalls[-1000:]),
            skipped_behind=self.skipped_behind,
        )
        kept = (
            f"{self.policy.taken - thinned} kept of {self.policy.taken} checkpoints "
            f"(storage budget {self.options.storage.text})"
            if thinned
            else f"{self.policy.taken} checkpoint{'' if self.policy.taken == 1 else 's'}"
        )
        who = f" (rank {self.rank} of {self.job.world_size})" if self.job else ""
        self.reporter.say(
            f"recorded {self.options.name}/{self.run_id}{who}: {self.next_iteration} iterations, "
            f"{kept} ({logical / 1e6:.1f} MB, {stored / 1e6:.1f} MB stored), "
            f"overhead {overhead:.2%} ({self.meta.overhead_parts()})"
        )

    def close(self, exit_status: int | None = None) -> None:
        """Flush every write, then record how the run ended (runs at exit, too)."""
        if self._closed:
            return
        self._closed = True
        if self.job is not None:
            if self.rank == 0:  # after the decision ahead: the other ranks' feeds stop
                self.job.publish(f"checkpoint/{self._points + 1}", Feed.END)
            self.job.close()
        self.writer.close()
        self._alive.set()
        self.meta = self.meta.updated(
            status="finished" if not exit_status else "failed",
            exit_status=exit_status,
            ended=time.time(),
            warnings=tuple(self.writer.warnings),
            callbacks=tuple(sorted(self.callbacks)),
            trackers=self.trackers.to_json(),
        )
        if exit_status and self.loops:  # after the traceback, which the summary line preceded
            where = f"was left in iteration {self.next_iteration - 1}" if self._left else "ended"
            self.reporter.say(
                f"run {self.options.name}/{self.run_id} failed (exit status {exit_status}) "
                f"after its loop {where}: `flor replay` replays it and runs on into the error"
            )
        if self.loops == 0 and not exit_status:
            self.reporter.warn(
                f"run {self.options.name}/{self.run_id} has no checkpoints: the "
                "script never entered a flor.it loop (see the notes above); `flor replay` "
                "re-runs it whole"
            )
        text = self.stdout.text()
        self.journal.finish(self.meta, {k: text.get(k, "") for k in ("pre", "post")})
        self.upload_failed = not self.flush_store()
        self.store.release_reserve()
        self.streams.release()


def _succeeded(future: Future[Written]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None
