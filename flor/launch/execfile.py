"""Run a (rewritten) script as ``__main__``, exactly as ``python script.py args`` would.

Same ``sys.argv``, ``sys.path[0]``, ``__file__`` and working directory; the
script's exit status comes back as ours. A traceback from the user's code
names their file and the line of the *original* source (the rewrite shifts
lines), with flor's own frames trimmed (coverage.py's execfile does the same).
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import sys
import traceback
import types

from flor.errors import FlorError
from flor.runtime.process.reporter import Reporter


def line_map(original: str, rewritten: str) -> dict[int, int]:
    """Rewritten line -> original line. Inserted lines map to the line before them;
    re-indented lines still match (compared without leading whitespace)."""
    old = [line.strip() for line in original.splitlines()]
    new = [line.strip() for line in rewritten.splitlines()]
    mapping: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(j2 - j1):
            if tag == "insert":
                mapping[j1 + k + 1] = max(i1, 1)  # flor's own line: blame the line before
            else:  # equal, or a rewritten line (`for x in flor.it(...)`): pair them up
                mapping[j1 + k + 1] = min(i1 + k, i2 - 1) + 1
    return mapping


def _freeze_what_exists() -> None:
    """Exempt every object that exists now (torch's modules, flor's journal) from the
    cyclic garbage collector: its full collections walked them all, 5% of a loop of
    millisecond steps. They live as long as the process; the script's own are collected."""
    import gc

    gc.collect()
    gc.freeze()


def run_as_main(
    path: str,
    argv: list[str],
    source: str,
    original: str | None,
    reporter: Reporter,
    as_module: str | None = None,
) -> int:
    """Execute ``source`` as the ``__main__`` module of ``path``; return the exit status.
    ``as_module``: the module ``path`` is, run as ``python -m`` runs it (``sys.path[0]`` the
    working directory, relative imports from its package)."""
    path = os.path.abspath(path)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    if as_module is not None:
        module.__package__ = as_module.rpartition(".")[0]
        module.__spec__ = importlib.util.spec_from_file_location(as_module, path)
    saved_main, saved_argv, saved_path0 = sys.modules["__main__"], sys.argv[:], sys.path[0]
    sys.modules["__main__"] = module  # classes defined by the script pickle as __main__.X
    sys.argv[:] = [path, *argv]
    sys.path[0] = os.getcwd() if as_module is not None else os.path.dirname(path)
    try:
        code = compile(source, path, "exec", dont_inherit=True)
        _freeze_what_exists()
        exec(code, module.__dict__)
    except SystemExit as e:
        return _exit_status(e, reporter)
    except FlorError as e:  # raised by flor inside the script (a corrupt checkpoint): one line
        reporter.error(e.message)
        return e.exit_code
    except BaseException as e:
        reporter.write(user_traceback(e, path, source, original))
        from flor.runtime.loop.context import report_where

        report_where()
        return 1
    finally:
        sys.argv[:] = saved_argv
        sys.path[0] = saved_path0
        sys.modules["__main__"] = saved_main
    return 0


def _exit_status(e: SystemExit, reporter: Reporter) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    reporter.write(f"{e.code}\n")  # what python prints for sys.exit("message")
    return 1


def user_traceback(e: BaseException, path: str, source: str, original: str | None) -> str:
    """The traceback python would print for ``e`` raised by the script at ``path``: from the
    script's own first frame, on the lines of ``original`` where flor ran ``source``."""
    frames = traceback.extract_tb(e.__traceback__)
    while frames and frames[0].filename != path:
        frames.pop(0)  # flor's own frames, before the script's
    if original is not None and original != source:
        mapping = line_map(original, source)
        lines = original.splitlines()
        for frame in frames:
            if frame.filename == path and frame.lineno is not None:
                frame.lineno = mapping.get(frame.lineno, frame.lineno)
                frame._line = lines[frame.lineno - 1] if frame.lineno <= len(lines) else ""  # type: ignore[attr-defined]
                frame.end_lineno = frame.lineno
                frame.colno = frame.end_colno = None
    return (
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_list(frames))
        + "".join(traceback.format_exception_only(type(e), e))
    )
