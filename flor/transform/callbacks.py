"""Callbacks a project hands to its own code, decorated so that a recording notes where they run.

A function handed to one of the project's own functions (minGPT's
``trainer.set_callback("on_batch_end", batch_end_callback)``) may run inside a block or
outside it: the source cannot tell, the trainer's dispatch decides. ``flor run`` puts
``@flor.callback("name")`` on its definition; the recording then notes which blocks ran it,
and replay leaves an edit to it out of the blocks that never did
(``fingerprints.project_fingerprints``'s ``seen``).
"""

from __future__ import annotations

import libcst as cst

from flor.transform.rewrite import add_flor_import


def decorate(
    module: cst.Module, names: frozenset[str], imports_flor: bool
) -> tuple[cst.Module, list[str]]:
    """``module`` with ``@flor.callback`` on each function named in ``names``; which it
    decorated, in order."""
    marker = _Decorate(names)
    out = module.visit(marker)
    if marker.done and not imports_flor:
        out = add_flor_import(out)
    return out, marker.done


class _Decorate(cst.CSTTransformer):
    def __init__(self, names: frozenset[str]) -> None:
        super().__init__()
        self.names = names
        self.done: list[str] = []

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        name = updated.name.value
        if name not in self.names or updated.asynchronous is not None:
            return updated
        self.done.append(name)
        note = cst.Decorator(cst.parse_expression(f'flor.callback("{name}")'))
        # Innermost: under @staticmethod or @property it wraps the function itself.
        return updated.with_changes(decorators=[*updated.decorators, note])
