"""Merge what parallel segments printed into what one full run would print."""

from __future__ import annotations

from flor.runs.records import SegmentResult


def merged_output(segments: list[SegmentResult], stderr: bool = False) -> str:
    """The prologue once (from the first segment), every iteration in order, the epilogue
    once (from the last): coverage.py's combine of per-worker data files, for stdout (or
    ``stderr``)."""
    ordered = sorted(segments, key=lambda s: s.segment[0])
    if not ordered:
        return ""
    texts = [s.stderr if stderr else s.output for s in ordered]
    parts = [texts[0].get("pre", "")]
    for seg, text in zip(ordered, texts, strict=True):
        parts.extend(text.get(str(i), "") for i in seg.iterations)
    parts.append(texts[-1].get("post", ""))
    return "".join(parts)
