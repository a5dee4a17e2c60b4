"""Library trainers whose loop flor drives: the training loop lives in the library, not the script.

``install`` makes each known framework's loop modules (``flor.frameworks``) take flor's
versions of their loop methods as they are imported: the same calls in the same order,
with ``flor.it`` over the iterations and a ``SkipBlock`` around each one's training. A
version flor does not know is named in one line and left alone: it then runs, and replays,
whole. ``lightning``: Lightning's ``Trainer.fit``; ``hf``: Hugging Face's ``Trainer.train``;
``block``: the block both open.

Imports: flor.frameworks, flor.runtime.loop, flor.runtime.process, flor.runtime.state.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from flor.runtime.process.reporter import Reporter


def install(reporter: Reporter) -> None:
    """Patch the known trainers' loops when the script imports them (once per process)."""
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        from flor.runtime.trainers import hf, lightning

        patches = {**lightning.patches(reporter), **hf.patches(reporter)}
        sys.meta_path.insert(0, _PatchOnImport(patches))


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of each module it patches, so that the patch
    runs right after the module's own code."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]) -> None:
        self.patches = patches

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = self.patches.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Patched(spec.loader, patch)
        return spec


class _Patched(importlib.abc.Loader):
    def __init__(self, loader: Any, patch: Callable[[ModuleType], None]) -> None:
        self.loader = loader
        self.patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self.loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.patch(module)
