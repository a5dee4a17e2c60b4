"""Source analysis and rewriting. Pure: no torch, no I/O (docs/architecture.md).

- ``instrument``/``instrument_project``: rewrite an unmodified training script, and the
  project files its main loop lives in, for flor (libcst, imported on use);
- ``compare``/``fingerprints``: which SkipBlocks an edit touched (probed inference);
- ``hindsight``: where an edit's statements run, for a sparse replay.

Imports: flor.errors, flor.frameworks, flor.sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flor.transform.fingerprints import BlockChanges, EndCall, Seen, compare, fingerprints

if TYPE_CHECKING:
    from flor.transform.instrumenter import instrument, instrument_project
    from flor.transform.report import Instrumented

__all__ = [
    "BlockChanges",
    "EndCall",
    "Instrumented",
    "Seen",
    "compare",
    "fingerprints",
    "instrument",
    "instrument_project",
]


def __getattr__(name: str) -> Any:
    """libcst only for what rewrites: a recording analyses its script without it."""
    if name in ("instrument", "instrument_project"):
        from flor.transform import instrumenter

        return getattr(instrumenter, name)
    if name == "Instrumented":
        from flor.transform.report import Instrumented

        return Instrumented
    raise AttributeError(name)
