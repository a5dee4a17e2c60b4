"""Loading a checkpoint's pickled values without letting the bytes choose what runs.

Every byte replay reads is checked against the SHA-256 that points at it, but
whoever can write the store can write a journal entry and its checkpoint
alike. So the values flor pickles (a user's object it could not take apart)
are loaded by an unpickler that resolves only what a pickle of training state
needs, and a checkpoint that asks for anything else is refused as corrupt:

- a class, unless its module reaches the operating system (``os``,
  ``subprocess``, ``socket``, ``io``, ...) or it builds code (``type``);
- a constant (``torch.float32``, an enum member);
- a function only where it rebuilds data: torch's tensor rebuilders, numpy's
  array and generator constructors, ``copyreg``'s, and the project's own
  functions (modules loaded from outside the interpreter's installation: the
  code replay runs anyway). ``builtins.eval``, ``os.system``, ``getattr`` and
  the like are never resolved, and a module is never handed out.

A torch storage pickled inside such a value is loaded weights-only. What is not
prevented: resolving a name imports its module, as any unpickling does, and an
installed module's top-level code runs on import (checkpoints are loaded ahead,
before the script has imported its own modules, so "only what is imported" cannot
be the rule).
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import sysconfig
import types
from typing import Any

import torch

from flor.errors import CorruptCheckpoint

# Modules whose classes act on the machine when constructed or rebuilt: files, processes,
# sockets, code, the interpreter. A class from one of these is never resolved.
_SYSTEM = frozenset(
    {"os", "posix", "nt", "sys", "subprocess", "_posixsubprocess", "shutil", "socket"}
    | {"_socket", "ssl", "select", "selectors", "signal", "ctypes", "_ctypes", "mmap", "fcntl"}
    | {"importlib", "runpy", "code", "codeop", "pty", "pickle", "_pickle", "marshal", "shelve"}
    | {"dbm", "tempfile", "io", "_io", "zipfile", "tarfile", "gzip", "bz2", "lzma", "logging"}
    | {"sqlite3", "http", "urllib", "ftplib", "smtplib", "xmlrpc", "webbrowser", "threading"}
    | {"_thread", "multiprocessing", "concurrent", "asyncio", "atexit", "gc", "inspect"}
    | {"types", "pdb", "bdb", "timeit", "trace", "platform", "sysconfig", "site", "glob"}
    | {"pathlib", "fileinput", "zipimport", "pkgutil", "venv", "ensurepip", "setuptools"}
    | {"distutils", "pip", "codecs", "operator", "functools"}
)
_SAFE_CLASSES_OF_SYSTEM = frozenset({("functools", "partial")})  # stores; calls nothing
_UNSAFE_BUILTIN_CLASSES = frozenset({"type", "classmethod", "staticmethod", "property", "super"})
_SAFE_BUILTIN_FUNCTIONS = frozenset(
    {"abs", "all", "any", "bin", "chr", "divmod", "format", "hash", "hex", "len", "max", "min"}
    | {"oct", "ord", "pow", "print", "repr", "round", "sorted", "sum", "isinstance", "issubclass"}
)
# Functions that rebuild values, by module; a name ending in "*" is a prefix.
_REBUILDERS = types.MappingProxyType(
    {
        "copyreg": ("_reconstructor", "__newobj__", "__newobj_ex__"),
        "_codecs": ("encode",),
        "array": ("_array_reconstructor",),
        "re": ("_compile",),
        "torch._utils": ("_rebuild_*",),
        "torch._tensor": ("_rebuild_*",),
        "torch.serialization": ("_get_layout",),
        "torch.storage": ("_load_from_bytes",),
        "numpy._core.multiarray": ("_reconstruct", "scalar"),
        "numpy.core.multiarray": ("_reconstruct", "scalar"),
        "numpy._core.numeric": ("_frombuffer",),
        "numpy.core.numeric": ("_frombuffer",),
        "numpy.random._pickle": ("__*",),
        "numpy.random.bit_generator": ("__pyx_unpickle_*",),
    }
)
_INSTALLED = tuple(
    os.path.realpath(p) + os.sep
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values()}
    if p
)


class Refused(Exception):
    """The pickle names something a checkpoint of training state never holds."""


def loads(data: bytes, key: str) -> Any:
    """Unpickle ``data`` from the checkpoint ``key``; CorruptCheckpoint if it asks for code."""
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except Refused as e:
        raise CorruptCheckpoint(key, f"its pickle asks for {e}, which flor never loads") from None
    except Exception as e:
        raise CorruptCheckpoint(
            key, f"a pickled value does not load ({type(e).__name__})"
        ) from None


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name)
        where = getattr(found, "__module__", None) or module  # the object's own, not the asked
        if found is torch.storage._load_from_bytes:
            return _storage_from_bytes
        if isinstance(found, type):
            if _class_allowed(found, where):
                return found
        elif isinstance(found, types.ModuleType):
            pass
        elif not callable(found):
            return found  # a constant: a dtype, an enum member
        elif _function_allowed(found, where):
            return found
        raise Refused(f"{where}.{getattr(found, '__qualname__', name)}")


def _class_allowed(cls: type, module: str) -> bool:
    if module == "builtins":
        return cls.__name__ not in _UNSAFE_BUILTIN_CLASSES
    return module.split(".")[0] not in _SYSTEM or (module, cls.__name__) in _SAFE_CLASSES_OF_SYSTEM


def _function_allowed(fn: Any, module: str) -> bool:
    name = getattr(fn, "__name__", "")
    if module == "builtins":
        return name in _SAFE_BUILTIN_FUNCTIONS
    for allowed in _REBUILDERS.get(module, ()):
        if name == allowed or (allowed.endswith("*") and name.startswith(allowed[:-1])):
            return True
    return _project_module(module)


def _project_module(module: str) -> bool:
    """A module of the user's project: ``__main__``, or one loaded from outside the
    interpreter's installation (not the standard library, not site-packages)."""
    if module == "__main__":
        return True
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None)
    if not path or module.split(".")[0] in _SYSTEM or module.split(".")[0] == "flor":
        return False
    return not os.path.realpath(path).startswith(_INSTALLED)


def _storage_from_bytes(data: bytes) -> Any:
    """``torch.storage._load_from_bytes`` without its full unpickling."""
    return torch.load(io.BytesIO(data), weights_only=True)


def preload(tree: Any, key: str) -> None:
    """Load every pickled value of a decoded checkpoint now (``node["loaded"]``), so that a
    refused one makes the checkpoint unusable before replay skips the block it restores."""
    stack = [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if x.get("k") == "pickle" and isinstance(x.get("v"), bytes) and "loaded" not in x:
                x["loaded"] = loads(x["v"], key)
                continue
            stack.extend(v for v in x.values() if isinstance(v, (dict, list, tuple)))
        elif isinstance(x, (list, tuple)):
            stack.extend(v for v in x if isinstance(v, (dict, list, tuple)))
