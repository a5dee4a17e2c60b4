"""Merge what parallel segments printed into what one full run would print."""

from __future__ import annotations

from flor.runs.records import SegmentResult


def merged_output(segments: list[SegmentResult]) -> str:
    """The prologue once (from the first segment), every iteration in order, the epilogue
    once (from the last): coverage.py's combine of per-worker data files, for stdout."""
    ordered = sorted(segments, key=lambda s: s.segment[0])
    if not ordered:
        return ""
    parts = [ordered[0].output.get("pre", "")]
    for seg in ordered:
        parts.extend(seg.output.get(str(i), "") for i in seg.iterations)
    parts.append(ordered[-1].output.get("post", ""))
    return "".join(parts)
