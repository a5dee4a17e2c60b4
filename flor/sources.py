"""A project's files, as the instrumenter reads them and as a run records them.

Below every floor (beside ``errors``): the transform takes ``SourceFile``s, the runtime
and the run catalogue keep ``ProjectFile``s, and neither imports the other for them.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

ENTRY = "__main__"  # the module name of the entry script


@dataclass(frozen=True)
class SourceFile:
    """A file of the project: the entry script (module ``__main__``) or one it imports."""

    module: str  # its import name
    path: str  # where it is, as the user's tools name it
    source: str
    is_package: bool = False  # an ``__init__.py``: relative imports start from itself
    package: str | None = None  # the entry run as ``python -m pkg.train``: "pkg"


@dataclass(frozen=True)
class ProjectFile:
    """A file of the project as a run uses it: ``source`` is what runs (rewritten or not)."""

    path: str  # relative to the project root (the script's folder; with -m, the working dir)
    module: str
    original: str
    source: str

    @property
    def rewritten(self) -> bool:
        return self.source != self.original


def project_sources(project: tuple[ProjectFile, ...], script: str, source: str) -> dict[str, str]:
    """Path -> source as run, for the project's files and the script (under ``script``)."""
    return {**{f.path: f.source for f in project}, script: source}


@functools.lru_cache(maxsize=64)
def python_ast(source: str) -> ast.Module:
    """``source`` parsed by Python's ``ast``, once per process for the same text: a start's
    checks (sharding, imports, the loop's tests, the blocks' openings) share one tree, which
    none of them may change. Raises ``SyntaxError`` as ``ast.parse`` does."""
    return ast.parse(source)
