"""The storage budget: parsing it, and which checkpoints thinning keeps (thinning.py)."""

from __future__ import annotations

import pytest

from flor.errors import FlorError
from flor.inputs import StorageBudget, parse_storage
from flor.runtime.checkpoints.thinning import Piece, Thinning, round_divisor

MB = 10**6


def _piece(g: int, blobs: dict[str, int] | None = None, created: set[str] | None = None) -> Piece:
    blobs = blobs if blobs is not None else {f"own{g}": MB}
    created = created if created is not None else set(blobs)
    return Piece(f"ckpt/{g}", 1000, blobs, frozenset(created))


def _record(
    budget: str, iterations: list[int], preferred: frozenset[int] = frozenset()
) -> Thinning:
    thinning = Thinning(parse_storage(budget))
    for g in iterations:
        thinning.add(g, [_piece(g)], g in preferred)
        thinning.excess(compute=3600.0)
    return thinning


def test_sizes_parse_as_users_write_them() -> None:
    assert parse_storage("10GB") == StorageBudget(10 * 10**9, text="10GB")
    assert parse_storage("500MiB").nbytes == 500 * 2**20
    assert parse_storage("1.5g").nbytes == 1_500_000_000
    assert parse_storage("2GB/h") == StorageBudget(2 * 10**9, per_hour=True, text="2GB/h")
    assert parse_storage("unlimited").limit(1e9) is None
    assert parse_storage(None).text == "10GB"  # the documented default
    for bad in ("0", "-1GB", "10XB", "GB", "ten"):
        with pytest.raises(FlorError, match="is not a positive size"):
            parse_storage(bad)


def test_a_per_hour_budget_grows_with_training() -> None:
    budget = parse_storage("2GB/h")
    assert budget.limit(1800.0) == 10**9 and budget.limit(0.0) == 0


def test_round_divisors() -> None:
    assert [round_divisor(n) for n in (1, 3, 4, 10, 30, 40, 100, 250, 2000)] == [
        1, 1, 2, 10, 10, 20, 100, 50, 2000,
    ]  # fmt: skip


def test_what_stays_is_evenly_spaced_on_round_counts_and_the_newest() -> None:
    """A checkpoint every 10 steps for 1,000 steps, a budget of about 10: what stays are
    the multiples of 100 (each g + 1), and the newest."""
    thinning = _record("10.5MB", [g for g in range(1000) if (g + 1) % 10 == 0])
    kept = thinning.kept
    assert kept == [99, 199, 299, 399, 499, 599, 699, 799, 899, 999]
    assert thinning.stored <= 10.5 * MB and thinning.thinned == 100 - len(kept)


def test_preferred_checkpoints_outlast_round_ones() -> None:
    """The eves of the loop's own periodic iterations (g = 36, 73, ...) are where hindsight
    looks: they stay, though their counts are not round."""
    iterations = [g for g in range(200) if (g + 1) % 10 == 0 or (g + 1) % 37 == 0]
    preferred = frozenset(g for g in iterations if (g + 1) % 37 == 0)
    thinning = _record("6.5MB", iterations, preferred)
    assert thinning.kept == [36, 73, 110, 147, 184, 199]  # and the newest


def test_recent_checkpoints_outlast_older_ones_of_the_same_rank() -> None:
    thinning = _record("3.5MB", [0, 2, 4, 6, 8])  # g + 1 all odd: one rank
    assert thinning.kept == [4, 6, 8]


def test_a_shared_blob_goes_with_the_last_checkpoint_that_uses_it() -> None:
    thinning = Thinning(parse_storage("2.5MB"))
    frozen = {"frozen": MB}
    thinning.add(0, [_piece(0, {**frozen, "own0": MB})])  # the run put both in the store
    thinning.add(1, [_piece(1, {**frozen, "own1": MB}, created={"own1"})])
    assert thinning.stored == 3 * MB + 2000
    (dropped,) = thinning.excess(0.0)
    assert (dropped.iteration, dropped.keys, dropped.blobs) == (0, ("ckpt/0",), ("own0",))
    assert thinning.stored == 2 * MB + 1000, "the frozen blob stays: checkpoint 1 uses it"


def test_blobs_another_run_stored_are_never_deleted() -> None:
    thinning = Thinning(parse_storage("1.5MB"))
    for g in range(3):
        thinning.add(g, [_piece(g, {"backbone": 5 * MB, f"own{g}": MB}, created={f"own{g}"})])
    dropped = thinning.excess(0.0)
    assert [d.blobs for d in dropped] == [("own0",), ("own1",)]
    assert thinning.kept == [2]


def test_the_newest_stays_even_when_it_alone_exceeds_the_budget() -> None:
    thinning = _record("10KB", [0, 1, 2])
    assert thinning.kept == [2] and thinning.stored > 10_000


def test_another_rank_thins_what_rank_0_thinned() -> None:
    """A job's ranks keep the same iterations: the others follow rank 0's drops, whatever
    their own bytes (a replicated blob that rank 0 stored first costs them nothing)."""
    follower = Thinning(parse_storage("unlimited"))
    for g in range(4):
        follower.add(g, [_piece(g)])
    dropped = follower.follow([2, 0, 9])  # 9: not (yet) committed here
    assert [d.iteration for d in dropped] == [0, 2]
    assert dropped[0].blobs == ("own0",) and follower.kept == [1, 3]
    assert follower.follow([2]) == []  # once
