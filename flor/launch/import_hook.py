"""Rewrite the project's modules as they are imported, never on disk.

``install`` puts a finder first on ``sys.meta_path`` that answers only for the
files it was given (by path, so a module imported under two names is rewritten
under both) and leaves every other import to the import system. Its loader
compiles the rewritten source under the file's own name, with line numbers
mapped back to the file's, so tracebacks, ``inspect`` and ``linecache`` show
the user's lines; it never reads or writes bytecode caches, so a later plain
``python`` run never sees flor's code. DataLoader workers forked from the run
inherit the finder and the modules already imported.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Mapping, Sequence
from types import CodeType, MappingProxyType
from typing import Any

from flor.launch.execfile import line_map
from flor.launch.project_files import ProjectFiles
from flor.runtime.process.options import Options


def compile_mapped(source: str, original: str, path: str) -> CodeType:
    """``source`` (a rewrite of ``original``) compiled as ``path``, on ``original``'s lines."""
    tree = ast.parse(source, path)
    if source != original:
        lines = line_map(original, source)
        for node in ast.walk(tree):
            for attr in ("lineno", "end_lineno"):
                line = getattr(node, attr, None)
                if line is not None:
                    setattr(node, attr, lines.get(line, line))
            if getattr(node, "end_lineno", None) is not None and node.end_lineno < node.lineno:  # type: ignore[attr-defined]
                node.end_lineno = node.lineno  # type: ignore[attr-defined]
    return compile(tree, path, "exec", dont_inherit=True)


class _RewrittenLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, source: str) -> None:
        super().__init__(fullname, path)
        self.rewritten = source

    def get_code(self, fullname: str) -> CodeType:
        return compile_mapped(self.rewritten, self.get_source(fullname) or "", self.path)


class RewritingFinder(importlib.abc.MetaPathFinder):
    def __init__(self, rewritten: Mapping[str, str]) -> None:
        self.rewritten = MappingProxyType({os.path.realpath(p): s for p, s in rewritten.items()})

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin:
            return None
        source = self.rewritten.get(os.path.realpath(spec.origin))
        if source is None:
            return None  # not ours: the import system goes on as without flor
        spec.loader = _RewrittenLoader(fullname, spec.origin, source)
        return spec


def install(rewritten: Mapping[str, str]) -> RewritingFinder | None:
    """Rewrite the files ``rewritten`` names (absolute path -> source) when imported."""
    if not rewritten:
        return None
    finder = RewritingFinder(rewritten)
    sys.meta_path.insert(0, finder)
    return finder


def uninstall(finder: Any) -> None:
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)


def rewritten_files(options: Options) -> dict[str, str]:
    """What the hook rewrites for a run: each rewritten project file's source, by its path."""
    files = ProjectFiles(options.script or "", options.module is not None)
    return {files.absolute(f.path): f.source for f in options.project if f.rewritten}
