from __future__ import annotations

import random
import sys

import pytest

from flor.runtime.checkpoints.policy import CheckpointPolicy, Decision, round_period


def _simulate(epsilon: float, iteration: float, cost: float, n: int) -> list[int]:
    policy, compute, taken = CheckpointPolicy(epsilon), 0.0, []
    for i in range(n):
        compute += iteration
        if policy.should_checkpoint(compute):
            policy.charge(i, cost)
            policy.settle(i)
            taken.append(i)
    assert policy.spent <= epsilon * compute + cost  # the first one is always taken
    return taken


def test_cheap_checkpoints_every_iteration() -> None:
    assert _simulate(1 / 15, iteration=1.0, cost=0.01, n=20) == list(range(20))


def test_expensive_checkpoints_become_sparse_and_periodic() -> None:
    taken = _simulate(1 / 15, iteration=1.0, cost=0.5, n=60)
    gaps = [b - a for a, b in zip(taken, taken[1:])]
    assert taken[0] == 0 and len(taken) <= 60 / 7.5 + 1
    steady = gaps[1:]  # the first checkpoint is paid for up front
    assert max(steady) - min(steady) <= 1 and round(sum(steady) / len(steady)) in (7, 8)


def test_a_start_up_longer_than_training_is_budgeted_over_the_loop() -> None:
    """10 iterations of 10 ms after a 2 s start-up, checkpoints of 15 ms: a budget on the
    training alone affords the first only; one on the start-up, spread over the loop (20 ms
    per iteration at 10%), affords one every iteration, and the total stays within epsilon
    of the process's time (start-up and training)."""

    def run(startup: float) -> tuple[list[int], CheckpointPolicy]:
        policy, compute, taken = CheckpointPolicy(0.1), 0.0, []
        policy.allow_startup(startup, 10)
        for g in range(10):
            compute += 0.01
            if policy.should_checkpoint(compute, g):
                policy.charge(g, 0.015)
                policy.settle(g)
                taken.append(g)
        return taken, policy

    assert run(0.0)[0] == [0]
    taken, policy = run(2.0)
    assert taken == list(range(10))
    assert policy.spent <= 0.1 * (2.0 + 0.1) and policy.budgeted(0.1, 9) == 2.0


def _first_run(
    epsilon: float, startup: float, steps: int, step: float, cost: float
) -> tuple[int, CheckpointPolicy]:
    """A loop of unknown length on its first run: the checkpoints it takes, within epsilon of
    the process's time wherever it stops."""
    policy, compute, taken = CheckpointPolicy(epsilon), 0.0, 0
    policy.allow_startup(startup, 0)
    for g in range(steps):
        compute += step
        if policy.should_checkpoint(compute, g):
            policy.charge(g, cost)
            policy.settle(g)
            taken += 1
        assert policy.spent <= epsilon * (startup + compute) + cost
    return taken, policy


def test_a_loop_of_unknown_length_is_allowed_its_start_up_as_it_trains() -> None:
    """A ``count()`` loop on its first run: 100 iterations of 10 ms after a 2 s start-up,
    checkpoints of 15 ms. Its length unknown, the start-up is allowed 32 times as fast as the
    loop trains (whole after 0.0625 s of it): twice the checkpoints of the training alone, and
    still within epsilon of the process's time wherever the loop stops."""
    alone, _ = _first_run(0.1, 0.0, 100, 0.01, 0.015)
    taken, policy = _first_run(0.1, 2.0, 100, 0.01, 0.015)
    assert alone >= 5 and taken >= 2 * alone - 1
    assert policy.budgeted(1.0, 99) == 2.0 and policy.budgeted(0.05, 4) == pytest.approx(1.6)


def test_a_short_first_run_of_a_loop_of_unknown_length_is_checkpointed_at_most_iterations() -> None:
    """A script of a few seconds around a ``count()`` loop of 18 steps of 2 ms, checkpoints of
    1.5 ms: a hindsight print after each step then restores at least 3 of 4 of them."""
    taken, _ = _first_run(1 / 15, 2.5, 18, 0.002, 0.0015)
    assert taken >= 14


def test_overhead_is_reported() -> None:
    policy = CheckpointPolicy(0.1)
    policy.charge(0, 0.5)
    assert policy.overhead(10.0) == 0.05


def test_round_periods() -> None:
    assert [round_period(x) for x in (0.3, 1, 4.9, 5, 19, 20, 99, 260)] == [
        1,
        1,
        2,
        5,
        10,
        20,
        50,
        200,
    ]


def test_checkpoints_land_on_round_iteration_counts() -> None:
    """A budget that affords one checkpoint per ~27 iterations takes them where g + 1 is a
    multiple of 20: a new `if step % 100 == 0` line then finds one right before it."""
    policy, compute, taken = CheckpointPolicy(1 / 15), 0.0, []
    for g in range(400):
        compute += 0.01
        if policy.should_checkpoint(compute, g):
            policy.charge(g, 0.018)
            policy.settle(g)
            taken.append(g)
    assert taken[0] == 0 and all((g + 1) % 20 == 0 for g in taken[1:])
    assert policy.spent <= policy.epsilon * compute + 0.018


def _periodic(
    policy: CheckpointPolicy, step: float, cost: float, n: int, period: int
) -> tuple[list[int], float]:
    """``n`` iterations of ``step`` seconds whose loop branch fires every ``period``: the
    checkpoints taken, and the most their cost ever exceeded epsilon times the compute."""
    compute, taken, worst = 0.0, [], 0.0
    for g in range(n):
        compute += step
        if policy.should_checkpoint(compute, g, lambda g=g: (g + 1) % period == 0):
            policy.charge(g, cost)
            policy.settle(g)
            taken.append(g)
        worst = max(worst, policy.spent - policy.epsilon * compute)
    return taken, worst


def test_periodic_iterations_are_preferred_and_kept_in_reserve() -> None:
    """The loop's own branch fires every 50 iterations: each one's eve gets a checkpoint,
    and the budget left over goes to round counts, never leaving the next one short."""
    taken, _ = _periodic(CheckpointPolicy(1 / 15, periodic=True), 0.01, 0.02, 500, 50)
    eves = [g for g in range(50, 500) if (g + 1) % 50 == 0]
    assert set(eves) <= set(taken), taken


def test_the_first_periodic_eve_may_overdraw_the_budget_by_one_checkpoint() -> None:
    """The nanoGPT shape: evals every 100 steps of 7 ms, checkpoints of 13 ms, 0.15 s of
    start-up. At the eve of eval 100 the budget (47 ms) is short of a second checkpoint after
    the first one and the start-up's share, but the eve still gets it; the overdraft is paid
    back before the next checkpoint, so the overhead never exceeds epsilon by more than one."""
    policy = CheckpointPolicy(1 / 15, periodic=True)
    policy.charge_fixed(0.15)
    taken, worst = _periodic(policy, 0.007, 0.013, 1000, 100)
    assert worst <= 0.013 + 1e-9
    assert taken[:2] == [0, 99] and {199, 299, 399} <= set(taken), taken
    assert policy.overhead(7.0) <= 1 / 15 + 0.013 / 7.0


def test_a_loop_of_known_length_pays_the_start_up_as_it_goes() -> None:
    """The DQN shape: 10,000 steps of 0.4 ms, a log branch every 100, checkpoints of 2.4 ms,
    44 ms of flor's start-up. Paid at half the budget's rate, the start-up took half of what
    the first third of the loop earned: every other eve there went without a checkpoint,
    while the budget's surplus later went to round iterations no branch fires on. Paid in
    proportion to the iterations, the eves without one are spread thin over the loop, and
    the run still ends within its budget."""

    def eves_missed(length: int) -> list[int]:
        policy = CheckpointPolicy(1 / 15, periodic=True)
        policy.charge_fixed(0.044)
        policy.allow_startup(0.0, length)
        taken, worst = _periodic(policy, 0.0004, 0.0024, 10_000, 100)
        assert worst <= 0.0024 + 1e-9
        assert policy.overhead(4.0) <= 1 / 15 + 0.0024 / 4.0
        return [g for g in range(99, 10_000, 100) if g not in taken]

    unknown, known = eves_missed(0), eves_missed(10_000)
    assert len(known) < len(unknown) and len(known) <= 10, (known, unknown)
    assert all(b - a > 100 for a, b in zip(known, known[1:])), known  # never two in a row
    assert sum(g < 3_000 for g in unknown) >= 10, unknown  # the half-rate pattern it replaces


def test_start_up_is_charged_to_the_budget() -> None:
    """Half a second of start-up, at a 10% budget: it is paid off at half the budget's rate,
    so checkpoints come half as often until ten seconds of training have paid for it, and
    the run ends within its budget."""
    policy, compute, taken = CheckpointPolicy(0.1), 0.0, []
    policy.charge_fixed(0.5)
    for g in range(400):
        compute += 0.1
        if policy.should_checkpoint(compute, g):
            policy.charge(g, 0.01)
            policy.settle(g)
            taken.append(g)
    early = [g for g in taken if g < 100]
    assert taken[0] == 0 and 40 <= len(early) <= 55
    assert set(range(100, 400)) <= set(taken), "paid off: every iteration again"
    assert policy.overhead(compute) <= 0.1 + 0.01 / compute


def test_a_commit_charged_after_it_settled_counts_in_its_checkpoints_cost() -> None:
    """The writer measures a commit once it has run, after the commit settled its iteration:
    that cost still belongs to the checkpoint, in what the next ones are expected to cost."""
    policy = CheckpointPolicy(1 / 15)
    policy.charge(0, 0.004)  # the stall
    policy.charge(0, 0.006)  # the data
    policy.settle(0)  # inside the commit job
    policy.charge(0, 0.002)  # the commit itself, measured after it
    assert policy.spent == pytest.approx(0.012)
    assert not policy._pending and list(policy._recent) == [pytest.approx(0.012)]


@pytest.mark.parametrize("eves", [True, False])
def test_what_skipping_says_decide_says_too(eves: bool) -> None:
    """``skipping`` spares most iterations of a fast loop the whole decision: wherever it
    says an iteration is surely skipped, and at every later point below the iteration and
    the training it names, ``decide`` says SKIP too, whatever is charged in between (a
    random walk of bookkeeping, start-up allowances, periodic tests, checkpoints whose cost
    is charged in parts, later, and steps that speed up and slow down).
    Where no iteration can be the eve of a periodic one (``eves`` False: the lookahead
    foresaw none), it also says so while the budget is short of one more checkpoint, not
    only when it is spent."""
    rng = random.Random(7)
    fast = waiting = 0
    for _ in range(200):
        policy = CheckpointPolicy(rng.choice([0.0, 0.01, 1 / 15, 0.5]), periodic=eves)
        policy.charge_fixed(rng.random() * 0.5)
        if rng.random() < 0.5:
            policy.allow_startup(rng.random() * 3, rng.randrange(0, 500))  # 0: not known
        compute = 0.0
        horizon = (0, 0.0)  # what skipping said last
        step = 0.01
        late: list[int] = []  # checkpoints taken, not yet settled
        for g in range(300):
            if rng.random() < 0.02:  # steps that speed up (the period it affords grows), or not
                step *= rng.choice([0.1, 0.3, 3])
            compute += rng.random() * step
            policy.bookkeeping += rng.random() * rng.choice([0.002, 0.0001])
            kept = g < horizon[0] and compute < horizon[1]
            if not kept and rng.random() < 0.7:
                horizon = policy.skipping(compute, g, sys.maxsize if not eves else g + 1)
            sure = g < horizon[0] and compute < horizon[1]
            waiting += sure and policy.skipping(compute, g, g + 1)[0] <= g
            decided = policy.decide(compute, g, lambda: eves and rng.random() < 0.1)
            assert not sure or decided == Decision.SKIP, (g, compute)
            fast += sure
            if decided:  # a new cost to expect: asked again (the recorder's fast lane too)
                policy.charge(g, rng.random() * 0.05)
                late.append(g)
                horizon = (0, 0.0)
            if late and rng.random() < 0.2:  # the writer's part, charged once it is done
                taken = late.pop(0)
                policy.charge(taken, rng.random() * 0.02)
                policy.settle(taken)
                horizon = (0, 0.0)  # (the writer went idle: the fast lane asks again)
    assert fast > 0, "the shortcut is taken"
    assert waiting > 0 if not eves else waiting == 0, "and while short of one more, no eves"


def test_journaling_in_a_commit_is_not_what_a_checkpoint_costs() -> None:
    """A checkpoint's commit journals the iterations since the entry before: that share is
    the journal's, so the next checkpoints are expected to cost the checkpoint alone (every
    second is still charged to the budget)."""
    policy = CheckpointPolicy(1 / 15)
    policy.charge(0, 0.004)  # the stall
    policy.move_to_journaling(0, 0.003)  # inside the commit, before it settles
    policy.settle(0)
    policy.charge(0, 0.005)  # the data and the commit, as the writer measured them
    assert list(policy._recent) == [pytest.approx(0.006)]
    assert policy.spent + policy.journaling == pytest.approx(0.009)


def test_the_period_a_speed_up_affords_is_not_skipped() -> None:
    """Off a round iteration, ``skipping`` names the next one of the period the budget
    affords, but no further than where steps that speed up make that period grow: at
    iteration 240, after 0.05 s, a checkpoint of 1 ms at 10% affords one every 48.2
    iterations (every 20th is round); without more training, iteration 249 affords 50, and
    is round."""
    policy = CheckpointPolicy(0.1)
    policy.charge(0, 0.001)
    policy.settle(0)
    assert policy.decide(0.05, 240) == Decision.SKIP
    until, _ = policy.skipping(0.05, 240)
    assert 240 < until <= 249
    assert policy.decide(0.05, 249) == Decision.TAKE


def test_a_wait_outlasts_a_dearer_estimate_not_a_cheaper_one() -> None:
    """Over budget, ``skipping`` names where the budget affords one more checkpoint. A
    checkpoint's cost found dearer (the writer's part, charged later) leaves that wait as it
    was (a loop of short steps asked at every step it then waited for, each time a little
    later); a cheaper one ends it, and so does a dearer one where the wait was for a round
    iteration (the period it affords grows)."""
    policy = CheckpointPolicy(0.1)
    policy.charge(0, 0.010)
    policy.settle(0)
    assert policy.decide(0.05, 1) == Decision.SKIP  # 5 ms of budget for 10 ms spent
    until, below = policy.skipping(0.15, 2)  # past spent (10 ms), short of one more
    assert until > 2 and below > 0.19  # until 20 ms: 10 spent, 10 more
    policy.charge(0, 0.002)  # its commit, measured after it
    assert policy.skipping(0.15, 2) == (until, below)
    policy.charge(5, 0.0001)
    policy.settle(5)  # a cheaper one: 6.05 ms expected, 12.1 ms spent
    assert policy.skipping(0.19, 11)[0] <= 11
    assert policy.decide(0.19, 11) == Decision.TAKE

    policy = CheckpointPolicy(0.1)  # one every 40 iterations affordable: 20 are round
    policy.charge(0, 0.001)
    policy.settle(0)
    assert policy.decide(0.06025, 240) == Decision.SKIP
    assert policy.skipping(0.06025, 241)[0] == 259
    policy.charge(0, 0.0003)  # one every 52 affordable: 50 are round
    assert policy.skipping(0.06025, 241)[0] <= 249
    assert policy.decide(0.06025, 249) == Decision.TAKE
