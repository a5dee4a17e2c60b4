"""Adaptive checkpointing: keep checkpoint cost under ``epsilon`` of compute.

Cost is everything a checkpoint takes from training: the training thread's
in-memory copy (the stall) plus the writer's CPU time to serialize and hash it
(on a machine whose cores torch already uses, background CPU is not free).
flor's start-up is charged too (``fixed``: instrumenting the script; torch's
import is the script's own), paid off at half the budget's rate so that the
first minutes of a run still get checkpoints: it is fully paid once training
has run ``2 * fixed / epsilon`` seconds. A loop of known length pays it no faster
than in proportion to its iterations, whole by its last (at half rate, the first
third of a DQN loop bought every other eve, and its surplus later went to round
iterations; a loop that breaks off early ends over its budget by the part not yet due,
at most flor's start-up, tens of milliseconds). So is flor's ``bookkeeping`` in every
iteration (timing it, noting its counters, deciding; journaling the iterations
without a checkpoint), which no checkpoint causes but the budget covers too: a
loop of steps so short that it leaves little of the budget gets fewer
checkpoints. A checkpoint is taken when everything
spent so far plus the expected cost of this one stays within ``epsilon``
times the compute so far. Expensive checkpoints thereby become sparse and
periodic on their own; the first one is always taken, because cost must be
measured before it can be budgeted, and the estimate is a running mean over
the recent checkpoints, not only the first.

Where the budget buys fewer checkpoints than iterations, it spends them where
hindsight will look. People add hindsight lines beside the loop's periodic work
(``if step % 100 == 0:``), and replaying such a line needs the state right
before that iteration. So a checkpoint is *preferred* at the end of the
iteration before one where the loop's own ``if`` tests fire (the recorder
evaluates them one iteration ahead), one cost is kept in reserve for it, and
it may overdraw the budget by that one cost (the stated margin: the run's
overhead never exceeds epsilon by more than one checkpoint);
other checkpoints land on round iteration counts (multiples of 1, 2 or 5 times
a power of ten, the largest the budget affords), where new periodic tests
will most likely fire.

A run whose training is short beside its own start-up (imports, data loading,
model building: a few seconds before the first iteration) would buy almost no
checkpoints from a fraction of its training, though replay skips far more than
that. So once the script's start-up ``L`` and its loop's length ``N`` are known
(``allow_startup``), the budget is ``epsilon`` times the larger of the training
so far and ``L * (i + 1) / N``: the start-up, spread evenly over the loop. Its
overhead then stays within ``epsilon`` of the process's wall time; a run whose
training outlasts its start-up is budgeted as before. A loop whose length is not
known (``count()``, a while loop, on its first run) cannot spread the start-up over
its iterations: it is allowed ``STARTUP_RATE`` times as fast as the loop trains
(the budget is ``epsilon`` times the larger of the training so far and
``min(L, STARTUP_RATE * training)``), whole once training has run a thirty-second of
the start-up: a script of a few seconds around a short loop gets the checkpoints its
second run would, and a long loop spends that part of its budget early (at a slower
rate, a loop of 0.03 s of training after 2.5 s of start-up was allowed 0.3 s of it:
7 checkpoints of 18 iterations). Either stays within ``epsilon`` of the process's
wall time, wherever the loop stops.
"""

from __future__ import annotations

import enum
import math
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator

STARTUP_RATE = 32  # a loop of unknown length: its start-up allowed 32 times as fast as it trains


class Decision(enum.IntEnum):
    SKIP = 0
    TAKE = 1  # on a round iteration count
    PREFERRED = 2  # on the eve of one of the loop's periodic iterations


class CheckpointPolicy:
    def __init__(self, epsilon: float, periodic: bool = False) -> None:
        self.epsilon = epsilon
        self.periodic = periodic  # the loop has tests to prefer: keep a reserve for them
        self.spent = 0.0  # seconds of checkpoint cost so far
        self.fixed = 0.0  # seconds of flor's start-up
        self.bookkeeping = 0.0  # seconds of flor's own work in iterations (the training
        # thread adds to it without the lock: nothing else writes it)
        self.journaling = 0.0  # the writer's, journaling iterations without a checkpoint
        self.taken = 0
        self.startup = 0.0  # the script's own start-up before its loop (allow_startup)
        self.length = 0  # its loop's iterations (0: unknown, no allowance)
        self._recent: deque[float] = deque(maxlen=8)  # cost of each recent checkpoint
        self._pending: dict[int, float] = {}  # iteration -> cost charged so far
        self._expected: float | None = None  # the next one's cost (None: nothing charged yet)
        self._settled = -1  # the last checkpoint settled: the newest in _recent
        self._lock = threading.Lock()  # the writer thread charges too
        # Below both, ``decide`` surely says SKIP (``skipping``): set when it last found
        # everything spent above the budget, which only grows with training.
        self._skip_compute = 0.0
        self._skip_iteration = 0
        # Below these, it says SKIP unless the iteration is the eve of a periodic one: set when
        # it last found the budget short of one more checkpoint.
        self._wait_compute = 0.0
        self._wait_iteration = 0
        self._wait_off_round = False

    def should_checkpoint(
        self, compute: float, iteration: int = 0, preferred: Callable[[], bool] | None = None
    ) -> bool:
        return bool(self.decide(compute, iteration, preferred))

    def decide(
        self, compute: float, iteration: int = 0, preferred: Callable[[], bool] | None = None
    ) -> Decision:
        """Whether to checkpoint ``iteration`` now, after ``compute`` seconds of training;
        ``preferred()``: whether the next iteration is one of the loop's periodic ones.
        Called every iteration, so it reads what ``charge`` and ``settle`` keep, lock-free."""
        expected = self._expected
        if expected is None:
            return Decision.TAKE
        compute = self.budgeted(compute, iteration)
        budget = self.epsilon * compute
        charged = self._charged()
        fixed = self._fixed_by(iteration)
        spent = charged + min(fixed, budget / 2)  # start-up: paid off at half rate at most
        if spent > budget:
            self._skip_compute, self._skip_iteration = self._horizon(charged + min(charged, fixed))
            # and then short of one more: asked again at an eve, or once it affords one (what
            # is charged meanwhile made a loop ask again and again, each time a little later)
            self._wait(self._short_of(charged + expected, fixed))
            return Decision.SKIP
        if spent + expected > budget:
            # The eve of the loop's periodic work may overdraw the budget by one checkpoint:
            # early in a run, before the budget has grown to two checkpoints, the first
            # periodic iteration gets one too. Later ones wait until training has paid for it.
            if preferred is not None and preferred():
                return Decision.PREFERRED
            self._wait(self._short_of(charged + expected, fixed))
            return Decision.SKIP
        if preferred is not None and preferred():
            return Decision.PREFERRED
        if self.periodic and spent + 2 * expected > budget:
            # the reserve: the next periodic iteration must find it
            self._wait(self._short_of(charged + 2 * expected, fixed))
            return Decision.SKIP
        per_iteration = compute / (iteration + 1)
        affordable = expected / (self.epsilon * per_iteration) if per_iteration > 0 else 1.0
        period = round_period(affordable)
        if (iteration + 1) % period == 0:
            return Decision.TAKE
        self._wait(self._off_round(compute, iteration, expected, period), off_round=True)
        return Decision.SKIP

    def skipping(
        self, compute: float, iteration: int, quiet_until: int = sys.maxsize
    ) -> tuple[int, float]:
        """The iteration and the training below both of which ``decide`` surely says SKIP,
        from ``iteration`` after ``compute`` on, as it last found; ``(iteration, 0.0)``: not
        surely. Sure where what was spent when it last said so is still above the budget
        (what is spent only grows), or, before ``quiet_until - 1`` (no iteration before it
        is the eve of a periodic one), still short of one more checkpoint. Most iterations
        of a loop of sub-millisecond steps are below it, and ask nothing more."""
        if compute < self._skip_compute and iteration < self._skip_iteration:
            return self._skip_iteration, self._skip_compute
        until = min(self._wait_iteration, quiet_until - 1)
        if compute < self._wait_compute and iteration < until:
            return until, self._wait_compute
        return iteration, 0.0

    def _wait(self, horizon: tuple[float, int], off_round: bool = False) -> None:
        """Below ``horizon``, SKIP unless on an eve: while the budget is short of what the
        next checkpoint is expected to cost (which stays so if that estimate rises), or
        ``off_round``: off the round iterations of the period that estimate affords."""
        self._wait_compute, self._wait_iteration = horizon
        self._wait_off_round = off_round

    def _short_of(self, needed: float, fixed: float) -> tuple[float, int]:
        """Below what the budget is short of ``needed`` more than is charged: the start-up's
        part of what it then spends (``fixed`` of it due by now, which only grows) is paid at
        half rate at most, as in ``decide``."""
        return self._horizon(needed + min(needed, fixed))

    def _fixed_by(self, iteration: int) -> float:
        """flor's start-up due by ``iteration``: a loop of known length pays it as it goes,
        in proportion to its iterations, whole by its last (its first iterations, which
        bought few checkpoints while they paid it at half rate, now buy their eves)."""
        if self.length <= 0:
            return self.fixed
        return self.fixed * min(iteration + 1, self.length) / self.length

    def _off_round(
        self, base: float, iteration: int, expected: float, period: int
    ) -> tuple[float, int]:
        """Below where ``decide``, affording a checkpoint every ``period`` iterations (after
        ``base`` seconds, as ``budgeted`` says, and ``iteration``), finds no round one:
        before the next multiple of the period, while the period stays. It grows with the
        iterations and shrinks with the training: at ``base`` it stays below the next
        round number until iteration ``until``, and at ``until`` it stays ``period`` while
        the training's share is at most ``limit``."""
        epsilon = self.epsilon
        larger = next((r for r in round_numbers(10 * period) if r > period), 10 * period)
        until = min(
            ((iteration + 1) // period + 1) * period - 1,  # the next round iteration
            math.ceil(_shy(larger * epsilon * base / expected)) - 1,
        )
        limit = _shy(expected * (iteration + 1) / (epsilon * period))
        if self.budgeted(0.0, until) > limit:
            return 0.0, 0  # the start-up's share alone shrinks it
        if self.length <= 0 and self.startup > limit:
            return limit / STARTUP_RATE, until
        return limit, until

    def _horizon(self, spent: float) -> tuple[float, int]:
        """The training and the iteration below both of which the budget is below ``spent``
        (it is ``epsilon`` times the larger of training and the start-up's share: both grow)."""
        if self.epsilon <= 0:
            return math.inf, sys.maxsize
        compute = _shy(spent / self.epsilon)
        if self.length <= 0 and compute <= self.startup:
            compute /= STARTUP_RATE  # the start-up allowed faster than training goes
        allowance = self.epsilon * self.startup
        if self.length <= 0 or allowance < spent:
            return compute, sys.maxsize  # the start-up's share never reaches it
        # epsilon * startup * (i + 1) / length < spent
        return compute, max(math.ceil(_shy(spent * self.length / allowance)) - 1, 0)

    def allow_startup(self, seconds: float, length: int) -> None:
        """The script spent ``seconds`` before a loop of ``length`` iterations (0: not known)."""
        self.startup, self.length = max(seconds, 0.0), length
        self._skip_compute, self._skip_iteration = 0.0, 0  # the budget grows differently now
        self._wait_compute, self._wait_iteration = 0.0, 0

    def budgeted(self, compute: float, iteration: int) -> float:
        """The seconds the budget is a fraction of by ``iteration``: the training so far, or
        the start-up's share of the loop so far where that is larger."""
        if self.length <= 0:
            return max(compute, min(self.startup, STARTUP_RATE * compute))
        return max(compute, self.startup * min(iteration + 1, self.length) / self.length)

    def _charged(self) -> float:
        return self.spent + self.bookkeeping + self.journaling

    def charge(self, iteration: int, seconds: float) -> None:
        """Account ``seconds`` of cost to the checkpoint of ``iteration`` (negative: to
        journaling the iterations between checkpoints)."""
        with self._lock:
            if iteration < 0:
                self.journaling += seconds
                return
            self.spent += seconds
            if iteration not in self._pending and iteration == self._settled and self._recent:
                self._recent[-1] += seconds  # its commit, measured once the commit had run
            else:
                self._pending[iteration] = self._pending.get(iteration, 0.0) + seconds
            self._estimate()

    def move_to_journaling(self, iteration: int, seconds: float) -> None:
        """Of what the writer charges to the checkpoint of ``iteration`` (before it settles),
        ``seconds`` journaled the iterations since the entry before: the journal's cost, or
        every checkpoint would look as dear as those iterations' entry."""
        self.charge(iteration, -seconds)
        self.charge(-1, seconds)

    def _estimate(self) -> None:
        """The next checkpoint's expected cost: the mean of the recent ones (under the lock)."""
        recent = list(self._recent) or list(self._pending.values())
        old, self._expected = self._expected, sum(recent) / len(recent) if recent else None
        if self._wait_off_round or old is None or self._expected is None or self._expected < old:
            self._wait((0.0, 0))  # it waited for the old estimate

    def charge_fixed(self, seconds: float) -> None:
        """Account ``seconds`` of flor's own time that no checkpoint caused."""
        self.fixed += seconds

    def settle(self, iteration: int) -> None:
        """The checkpoint of ``iteration`` is fully paid: learn from its cost."""
        with self._lock:
            if iteration in self._pending:
                self._recent.append(self._pending.pop(iteration))
                self._settled = iteration
                self.taken += 1
                self._estimate()

    def overhead(self, compute: float) -> float:
        """Achieved overhead: everything charged, over compute."""
        return (self._charged() + self.fixed) / compute if compute > 0 else 0.0


def _shy(bound: float) -> float:
    """``bound``, a little less: a horizon that its rounding errors cannot carry past where
    ``decide``'s own arithmetic changes its answer."""
    return bound * (1 - 1e-9)


def round_numbers(limit: float) -> Iterator[int]:
    """1, 2, 5, 10, 20, 50, ... up to ``limit``, ascending."""
    power = 1
    while power <= limit:
        for m in (1, 2, 5):
            if m * power <= limit:
                yield m * power
        power *= 10


def round_period(interval: float) -> int:
    """The largest round number not above ``interval`` (at least 1)."""
    return max(round_numbers(interval), default=1)
