from __future__ import annotations

from flor.runtime.policy import CheckpointPolicy


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


def test_overhead_is_reported() -> None:
    policy = CheckpointPolicy(0.1)
    policy.charge(0, 0.5)
    assert policy.overhead(10.0) == 0.05
