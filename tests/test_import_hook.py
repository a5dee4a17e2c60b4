"""The import hook: project modules rewritten as imported, everything else untouched."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

from flor.launch import import_hook
from flor.launch.project_files import ProjectFiles

ORIGINAL = textwrap.dedent(
    """\
    def fail(x):
        y = x + 1
        raise ValueError(f"bad {y}")
    """
)
# What a rewrite does to line numbers: a line inserted above the code.
REWRITTEN = "import os  # inserted\n" + ORIGINAL.replace("y = x + 1", "y = x + 2")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "hooked_mod.py").write_text(ORIGINAL)
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith("hooked_")]:
        del sys.modules[name]


def test_a_project_module_runs_rewritten_on_its_own_lines(project: Path) -> None:
    path = project / "hooked_mod.py"
    finder = import_hook.install({str(path): REWRITTEN})
    try:
        import hooked_mod  # type: ignore[import-not-found]
    finally:
        import_hook.uninstall(finder)
    assert finder not in sys.meta_path
    assert hooked_mod.__file__ == str(path)
    with pytest.raises(ValueError, match="bad 3") as raised:  # the rewritten code ran
        hooked_mod.fail(1)
    frame = traceback.extract_tb(raised.tb)[-1]
    assert (frame.filename, frame.lineno) == (str(path), 3)  # the original's line
    assert frame.line == 'raise ValueError(f"bad {y}")'
    assert not (project / "__pycache__").exists()  # no bytecode a plain run could pick up


def test_other_modules_import_as_without_flor(tmp_path: Path) -> None:
    """A site-packages module imported while the hook is installed: the import system's own
    loader, file and source, byte for byte."""
    (tmp_path / "mine.py").write_text("x = 1\n")
    code = textwrap.dedent(
        f"""\
        import importlib.util, inspect, sys
        from flor.launch import import_hook
        finder = import_hook.install({{{str(tmp_path / "mine.py")!r}: "x = 2\\n"}})
        import jmespath
        spec = importlib.util.find_spec("jmespath")
        with open(jmespath.__file__, encoding="utf-8") as f:
            on_disk = f.read()
        assert type(jmespath.__spec__.loader).__name__ == "SourceFileLoader", jmespath.__spec__
        assert inspect.getsource(jmespath) == on_disk
        assert finder.find_spec("jmespath", None) is None
        print("untouched")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout == "untouched\n", done.stderr


def test_the_project_is_the_scripts_folder_not_site_packages(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "engine.py").write_text("def f(): pass\n")
    (tmp_path / "main.py").write_text("import pkg.engine\n")
    files = ProjectFiles(str(tmp_path / "main.py"))
    engine = files.resolve("pkg.engine")
    assert engine is not None and files.relative(engine.path) == "pkg/engine.py"
    assert files.resolve("pkg") is not None and files.resolve("pkg").is_package  # type: ignore[union-attr]
    for other in ("json", "torch", "torch.nn", "click", "flor.cli", "no_such_module"):
        assert files.resolve(other) is None, other


def test_a_module_imported_under_two_names_is_rewritten_under_both(project: Path) -> None:
    """One file, reachable as ``hooked_pkg.hooked_two`` and as ``hooked_two``: the hook
    answers by path, so both modules run the rewritten code."""
    (project / "hooked_pkg").mkdir()
    path = project / "hooked_pkg" / "hooked_two.py"
    path.write_text(ORIGINAL)
    sys.path.insert(0, str(project / "hooked_pkg"))
    finder = import_hook.install({str(path): REWRITTEN})
    try:
        import hooked_pkg.hooked_two as first  # type: ignore[import-not-found]
        import hooked_two as second  # type: ignore[import-not-found]
    finally:
        import_hook.uninstall(finder)
        sys.path.remove(str(project / "hooked_pkg"))
    assert first is not second
    for module in (first, second):
        with pytest.raises(ValueError, match="bad 3"):
            module.fail(1)
