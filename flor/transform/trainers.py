"""Which library trainers (``flor.frameworks``) a project trains with, read from its syntax.

A project trains with one when a file imports its package and some call names its entry
(``trainer.fit(...)``). Its block then calls the framework's training hooks by name, and
the hooks an argument of the trainer moves inside the training (``val_check_interval``)
where a call passes that argument.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from flor.frameworks import KNOWN, Framework


def used(trees: Iterable[ast.Module]) -> dict[Framework, frozenset[str]]:
    """Each framework the files of ``trees`` train with -> the names its block calls."""
    imported: set[str] = set()
    called: set[str] = set()
    keywords: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Attribute):
                    called.add(node.func.attr)
                keywords.update(k.arg for k in node.keywords if k.arg)
    found = {}
    for framework in KNOWN:
        if imported.intersection(framework.packages) and framework.entry in called:
            calls = set(framework.calls)
            for argument, more in framework.inside_if:
                if argument in keywords:
                    calls |= more
            found[framework] = frozenset(calls)
    return found
