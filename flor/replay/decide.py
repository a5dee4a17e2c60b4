"""Whether a block is restored or runs at an iteration, and why: the one rule a replay,
``flor replay --plan`` and its estimate share.

An iteration where the replay must start (an *entry*) restores its blocks. Elsewhere a block
runs where it has no checkpoint, where its checkpoint lacks a value the edit reads, where the
edit changes its code (it is *probed*), where ``--verify`` checks it against its checkpoint,
and where running it costs less than restoring it (``costs.RestoreCost``); it is restored
otherwise. A checkpoint refused as corrupt when read is the replay's to find: ``CORRUPT``.
"""

from __future__ import annotations

from dataclasses import dataclass

# Why a block runs, each said after a count of iterations ("3 without a checkpoint").
NO_CHECKPOINT = "without a checkpoint"
LACKING = "whose checkpoint lacks what the edit reads"
PROBED = "where the edit changes the block"
VERIFIED = "verified against their checkpoint"
CHEAPER = "where running was cheaper than restoring"
CORRUPT = "whose checkpoint was refused as corrupt"


@dataclass(frozen=True)
class BlockAction:
    restore: bool
    why: str = ""  # for a block that runs: one of the reasons above


RESTORE = BlockAction(True)


def block_action(
    entry: bool, recorded: bool, usable: bool, probed: bool, verify: bool, restore_pays: bool
) -> BlockAction:
    """What a block does at one iteration: ``entry``, the replay starts there; ``recorded``,
    the block has a checkpoint there; ``usable``, it holds what the edit reads; ``probed``,
    the edit changes the block; ``verify``, ``--verify`` picked the iteration;
    ``restore_pays``, restoring beats running it."""
    if entry:
        return RESTORE
    if not recorded:
        return BlockAction(False, NO_CHECKPOINT)
    if not usable:
        return BlockAction(False, LACKING)
    if probed:
        return BlockAction(False, PROBED)
    if verify:
        return BlockAction(False, VERIFIED)
    if not restore_pays:
        return BlockAction(False, CHEAPER)
    return RESTORE
