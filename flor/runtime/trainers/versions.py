"""Whether the installed version of a library trainer is one whose loop flor knows."""

from __future__ import annotations

import importlib.metadata

from flor.runtime.process.reporter import Reporter


def known(
    distribution: str,
    versions: tuple[tuple[int, int], ...],
    name: str,
    entry: str,
    reporter: Reporter,
) -> bool:
    """Whether ``distribution``'s installed major.minor is one of ``versions``; if not, one
    line saying that ``name``'s ``entry`` ("Trainer.fit") runs, and replays, whole."""
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "(unknown)"
    if tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) in versions:
        return True
    listed = ", ".join(f"{a}.{b}" for a, b in versions)
    reporter.warn_once(
        f"{distribution}-version",
        f"{name} {version} is not a version flor knows ({listed}): {entry} runs without "
        "checkpoints, and replays whole",
    )
    return False
