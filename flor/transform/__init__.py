"""Source analysis and rewriting. Pure: no torch, no I/O (ARCHITECTURE.md)."""

from __future__ import annotations

from flor.transform.blocks import BlockChanges, compare, fingerprints

__all__ = ["BlockChanges", "compare", "fingerprints"]
