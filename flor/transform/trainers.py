"""Which library trainers (``flor.frameworks``) a project trains with, read from its syntax.

A project trains with one when a file imports its package, builds a ``...Trainer(...)``
and calls its entry (``trainer.fit(...)``). Its block then calls the framework's training
hooks by name, and the hooks an argument of the trainer moves inside the training
(``val_check_interval``) where a call passes that argument with another value than the
one that keeps them out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from flor.frameworks import KNOWN, Framework


def used(trees: Iterable[ast.Module]) -> dict[Framework, frozenset[str]]:
    """Each framework the files of ``trees`` train with -> the names its block calls."""
    imported: set[str] = set()
    called: set[str] = set()
    passed: dict[str, list[ast.expr]] = {}  # keyword -> the values calls pass it
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call):
                func = node.func
                called.add(
                    func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                )
                for k in node.keywords:
                    if k.arg:
                        passed.setdefault(k.arg, []).append(k.value)
    builds = any(name.endswith("Trainer") for name in called)
    found = {}
    for framework in KNOWN:
        if builds and imported.intersection(framework.packages) and framework.entry in called:
            calls = set(framework.calls)
            for argument, unless, more in framework.inside_if:
                if any(_other(value, unless) for value in passed.get(argument, ())):
                    calls |= more
            found[framework] = frozenset(calls)
    return found


def _other(value: ast.expr, unless: object) -> bool:
    """Whether ``value`` may be something else than the constant ``unless``."""
    return not (isinstance(value, ast.Constant) and value.value == unless)
