"""Which modules are the project's: the files ``flor`` may read, record and rewrite.

The project is the entry script's folder (``sys.path[0]`` of ``python script.py``)
and any other folder on ``sys.path`` outside the interpreter's own (standard
library, site-packages), such as a checkout installed with ``pip install -e .``.
Modules are found without importing anything, the way the import system's path
finder would: the first folder that has the module wins.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import sysconfig

from flor.errors import FlorError
from flor.sources import ProjectFile, SourceFile

_FLOR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _interpreter_folders() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    found = {os.path.realpath(paths[k]) for k in keys if k in paths}
    found |= {
        os.path.realpath(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))
    }
    return tuple(sorted(found))


class ProjectFiles:
    """The project of ``script``: ``resolve`` turns a module name into its file."""

    def __init__(self, script: str, as_module: bool = False) -> None:
        """``as_module``: the script runs as ``python -m``, from the working directory."""
        self.root = os.getcwd() if as_module else os.path.dirname(os.path.abspath(script))
        self._excluded = (*_interpreter_folders(), _FLOR)
        others = [p for p in sys.path[1:] if p and self._ours(os.path.abspath(p))]
        self.search = [self.root, *(p for p in others if os.path.abspath(p) != self.root)]

    def _ours(self, path: str) -> bool:
        real = os.path.realpath(path)
        return not any(real == e or real.startswith(e + os.sep) for e in self._excluded)

    def resolve(self, module: str) -> SourceFile | None:
        """The project's file for ``module``; None for modules that are not the project's."""
        origin, is_package = self._find(module)
        if origin is None or not origin.endswith(".py") or not self._ours(origin):
            return None
        try:
            with open(origin, encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        return SourceFile(module, self.shown(origin), source, is_package)

    def _find(self, module: str) -> tuple[str | None, bool]:
        parent, _, _ = module.rpartition(".")
        if parent:
            origin, is_package = self._find(parent)
            if origin is None or not is_package:
                return None, False
            where = [os.path.dirname(origin)]
        else:
            where = self.search
        try:
            spec = importlib.machinery.PathFinder.find_spec(module, where)
            if spec is None and not parent:  # an editable install's own finder
                spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None, False
        if spec is None or not spec.origin or not spec.has_location:
            return None, False
        return os.path.abspath(spec.origin), spec.submodule_search_locations is not None

    @staticmethod
    def shown(path: str) -> str:
        """``path`` as a user names it: relative to the working directory, if inside it."""
        relative = os.path.relpath(path)
        return path if relative.startswith("..") else relative

    def relative(self, path: str) -> str:
        """``path`` relative to the project's root, with ``/``: how a run records it."""
        return os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")

    def absolute(self, relative: str) -> str:
        """A path ``relative`` names: the inverse of ``relative``."""
        return os.path.normpath(os.path.join(self.root, relative))


def module_script(module: str) -> str:
    """The file ``python -m module`` runs, from the working directory's project; a one-line
    FlorError if there is none."""
    files = ProjectFiles(os.path.join(os.getcwd(), "-m"), as_module=True)
    found = files.resolve(module)
    if found is not None and found.is_package:
        found = files.resolve(module + ".__main__")
    if found is None:
        raise FlorError("no-script", f"no module {module} in the project at {files.root}")
    return found.path


def project_file(files: ProjectFiles, f: SourceFile, source: str) -> ProjectFile:
    """``f`` as a run records it, ``source`` being what runs."""
    return ProjectFile(files.relative(f.path), f.module, f.source, source)
