"""Patch a module once it is imported (or now, if it is already): the trackers flor works
with are the user's optional packages, never imported by flor itself."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

Patch = Callable[[types.ModuleType], None]


def after_import(name: str, patch: Patch) -> None:
    """Run ``patch`` on module ``name`` right after it executes (now, if it has)."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport):
            finder.patches[name] = patch
            return
    sys.meta_path.insert(0, _AfterImport({name: patch}))


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, patches: dict[str, Patch]) -> None:
        self.patches = patches

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = self.patches.pop(fullname, None)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> Any:
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
