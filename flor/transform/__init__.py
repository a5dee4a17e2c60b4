"""Source analysis and rewriting. Pure: no torch, no I/O (ARCHITECTURE.md).

- ``instrument``: rewrite an unmodified training script for flor (libcst);
- ``compare``/``fingerprints``: which SkipBlocks an edit touched (probed inference).
"""

from __future__ import annotations

from flor.transform.fingerprints import BlockChanges, EndCall, compare, fingerprints
from flor.transform.instrument import instrument
from flor.transform.report import Instrumented

__all__ = ["BlockChanges", "EndCall", "Instrumented", "compare", "fingerprints", "instrument"]
