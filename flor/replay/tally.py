"""What a replay did, for the one line it ends with on stderr (and for exceptions)."""

from __future__ import annotations

import time
from collections import Counter


class ReplayTally:
    """What a replay did, per iteration: restored (every block from its checkpoint),
    re-executed (some block ran), or run quietly to rebuild state; with the time each took."""

    def __init__(self) -> None:
        self.counts = {"restored": 0, "re-executed": 0, "quiet": 0}
        self.seconds = dict.fromkeys(self.counts, 0.0)
        # (name, why it ran: decide's reason; "" restored) of this iteration's last block
        self.last_block: tuple[str, str] | None = None
        self.checked: list[tuple[int | None, str, str | None]] = []  # (iteration, block, differs)
        self.echoed = 0  # iterations not run: their recorded output printed (sparse replay)
        self.why: dict[
            int, str
        ] = {}  # a shown iteration that re-executed -> why (its first block's)
        self._quiet = False
        self._why = ""
        self._start = 0.0

    @property
    def iterations(self) -> int:
        return sum(self.counts.values())

    def begin(self, quiet: bool) -> None:
        self._quiet, self._why, self.last_block = quiet, "", None
        self._start = time.perf_counter()

    def block(self, name: str, why: str) -> None:
        """Block ``name`` ran, for reason ``why`` (``decide``), or was restored (``""``)."""
        self._why = self._why or why
        self.last_block = (name, why)

    def end(self, g: int) -> None:
        kind = "quiet" if self._quiet else "re-executed" if self._why else "restored"
        self.counts[kind] += 1
        self.seconds[kind] += time.perf_counter() - self._start
        if kind == "re-executed":
            self.why[g] = self._why

    def summary(self) -> str:
        shown = self.counts["restored"] + self.counts["re-executed"]
        parts = [
            f"{self.counts[k]} {k} ({self.seconds[k]:.2f} s)"
            for k in ("restored", "re-executed")
            if self.counts[k]
        ]
        line = f"replayed {_iterations(shown)}: {', '.join(parts) or 'none'}"
        if self.why:
            reasons = Counter(self.why.values()).most_common()
            line += f" ({', '.join(f'{n} {why}' for why, n in reasons)})"
        if self.echoed:
            line += f"; {self.echoed} not run, their recorded output printed"
        if self.counts["quiet"]:
            line += (
                f"; before them, {_iterations(self.counts['quiet'])} run without output to "
                f"rebuild the state they start from ({self.seconds['quiet']:.2f} s)"
            )
        if self.checked:
            bad = [d for _, _, d in self.checked if d is not None]
            line += f"; verified {len(self.checked)} re-executed checkpointed blocks: "
            if bad:
                line += f"{len(bad)} DIFFER from the record (first: {self.diverged()})"
            else:
                line += "all match the record"
        return line

    def diverged(self) -> str:
        """Where a re-executed block first ended away from its checkpoint; "" if none did."""
        for g, name, differs in self.checked:
            if differs is not None:
                return f"iteration {g}, block {name!r}, in {differs}"
        return ""


def _iterations(n: int) -> str:
    return f"{n} iteration{'' if n == 1 else 's'}"
