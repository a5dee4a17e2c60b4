"""A parsed script with the metadata every analysis needs, and its same-file call graph."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import libcst as cst
from libcst.metadata import BaseAssignment, MetadataWrapper, PositionProvider, Scope, ScopeProvider

from flor.transform.fingerprints import SPAWNERS

# Calls that do training work: a backward pass, an optimizer step, or clearing gradients for
# one (a loss scaler's `__call__` often does the other two: DeiT's `loss_scaler(loss, optimizer)`).
TRAINING_METHODS = frozenset({"backward", "step", "zero_grad"})
# ``.step()`` on these is not training: schedulers, environments, progress bars.
NOT_OPTIMIZERS = ("sched", "lr", "env", "bar", "pbar", "progress", "tqdm", "warmup")
FunctionNode = cst.FunctionDef
Nodes = Sequence[cst.CSTNode]


_NOWHERE = cst.Module(body=[])  # where builtins are bound: no position in the file


def node_of(assignment: BaseAssignment) -> cst.CSTNode:
    """The node that binds a name (``Assignment.node``); builtins have none."""
    node = getattr(assignment, "node", None)
    return node if isinstance(node, cst.CSTNode) else _NOWHERE


class _Index(cst.CSTVisitor):
    """One pass over the tree: each node's parent, preorder position and subtree end.

    libcst computes ``node.children`` anew on every access; analyses walk the
    tree many times, so they walk this flat preorder list instead.
    """

    def __init__(self) -> None:
        self.order: list[cst.CSTNode] = []
        self.position: dict[int, int] = {}
        self.end: dict[int, int] = {}
        self.parent: dict[int, cst.CSTNode] = {}
        self._stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._stack:
            self.parent[id(node)] = self._stack[-1]
        self.position[id(node)] = len(self.order)
        self.order.append(node)
        self._stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()
        self.end[id(original_node)] = len(self.order)


def walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Every node below ``node`` (itself included), in source order."""
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out


def dotted(expr: cst.BaseExpression) -> str:
    """``self.model.fc`` -> "self.model.fc"; "" for anything that is not a plain chain."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted(expr.value)
        return f"{base}.{expr.attr.value}" if base else ""
    return ""


def spawned(call: cst.Call) -> str | None:
    """The function ``mp.spawn(main_worker, ...)`` runs in each process it starts, by name."""
    if dotted(call.func).rsplit(".", 1)[-1] not in SPAWNERS or not call.args:
        return None
    first = next((a for a in call.args if a.keyword and a.keyword.value == "fn"), call.args[0])
    if first.keyword is not None and first.keyword.value != "fn":
        return None
    return first.value.value if isinstance(first.value, cst.Name) else None


def root_name(expr: cst.BaseExpression) -> cst.Name | None:
    """The name an attribute/subscript/call chain starts from: ``a`` in ``a.b[0].c()``."""
    while True:
        if isinstance(expr, cst.Name):
            return expr
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif isinstance(expr, cst.Call):
            expr = expr.func
        else:
            return None


# Functions in the project's other files that a call reaches (``flor.transform.project``).
External = Callable[["Program", cst.Call], "list[tuple[Program, FunctionNode]]"]


def _no_external(p: Program, call: cst.Call) -> list[tuple[Program, FunctionNode]]:
    return []


class Program:
    def __init__(
        self, module: cst.Module, external: External = _no_external, name: str = "__main__"
    ) -> None:
        self.module = module
        self.external = external
        self.name = name  # the module's import name
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        metadata = wrapper.resolve_many([ScopeProvider, PositionProvider])
        self.scopes: Any = metadata[ScopeProvider]
        self.positions: Any = metadata[PositionProvider]
        self.index = _Index()
        module.visit(self.index)
        self.functions: dict[str, list[FunctionNode]] = {}
        for node in self.walk(module):
            if isinstance(node, cst.FunctionDef):
                self.functions.setdefault(node.name.value, []).append(node)
        self.memo: dict[object, object] = {}  # analyses cache per node

    def walk(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """Every node below ``node`` (itself included), in source order, from the index."""
        index = self.index
        if id(node) in index.position:
            return index.order[index.position[id(node)] : index.end[id(node)]]
        return walk(node)

    # -- positions and names ------------------------------------------------------------
    def line(self, node: cst.CSTNode) -> int:
        return int(self.positions[node].start.line)

    def last_line(self, node: cst.CSTNode) -> int:
        return int(self.positions[node].end.line)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def scope(self, node: cst.CSTNode) -> Scope | None:
        """The scope ``node`` is in; ``None`` for names that are not variables (``a.attr``)."""
        return self.scopes.get(node)  # type: ignore[no-any-return]

    def statement_scope(self, node: cst.CSTNode) -> Scope:
        """The scope a statement runs in (every statement has one)."""
        scope = self.scope(node)
        assert scope is not None, "statements always have a scope"
        return scope

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.index.parent.get(id(node))

    def before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Whether ``a`` starts before ``b`` in the source."""
        position = self.index.position
        return id(a) in position and id(b) in position and position[id(a)] < position[id(b)]

    def qualname(self, fn: FunctionNode | None) -> str:
        if fn is None:
            return "<module>"
        parts = [fn.name.value]
        parts += [
            a.name.value
            for a in self.ancestors(fn)
            if isinstance(a, (cst.FunctionDef, cst.ClassDef))
        ]
        return ".".join(reversed(parts))

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        """Whether ``node`` is ``container`` or below it (a range check on preorder positions)."""
        position = self.index.position
        at, start = position.get(id(node)), position.get(id(container))
        if at is None or start is None:
            return False
        return start <= at < self.index.end[id(container)]

    # -- the call graph -------------------------------------------------------------------
    def callees(self, call: cst.Call) -> list[FunctionNode]:
        """Same-file functions a call may reach: by name, or any method of that name (and
        what ``mp.spawn`` runs)."""
        target = spawned(call)
        if target is not None and target in self.functions:
            return self.functions[target]
        func = call.func
        if isinstance(func, cst.Name):
            return self.functions.get(func.value, [])
        if isinstance(func, cst.Attribute):
            return [f for f in self.functions.get(func.attr.value, []) if self.is_method(f)]
        return []

    def is_method(self, fn: FunctionNode) -> bool:
        block = self.parent(fn)  # IndentedBlock -> ClassDef
        return block is not None and isinstance(self.parent(block), cst.ClassDef)

    def calls(self, node: cst.CSTNode) -> list[cst.Call]:
        """Calls in ``node``, not in function, class or lambda definitions nested in it."""
        key = ("calls", id(node))
        if key not in self.memo:
            nested = [
                n
                for n in self.walk(node)
                if n is not node and isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
            ]
            self.memo[key] = [
                n
                for n in self.walk(node)
                if isinstance(n, cst.Call) and not any(self.inside(n, d) for d in nested)
            ]
        return self.memo[key]  # type: ignore[return-value]

    def reachable_functions(self, node: cst.CSTNode) -> list[FunctionNode]:
        """Same-file functions that ``node`` calls, transitively."""
        seen: dict[int, FunctionNode] = {}
        todo = [f for call in self.calls(node) for f in self.callees(call)]
        while todo:
            fn = todo.pop()
            if id(fn) in seen:
                continue
            seen[id(fn)] = fn
            todo.extend(f for call in self.calls(fn.body) for f in self.callees(call))
        return list(seen.values())

    # -- training work --------------------------------------------------------------------
    @staticmethod
    def is_training_call(call: cst.Call) -> bool:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in TRAINING_METHODS:
            return False
        if func.attr.value == "backward":
            return True
        receiver = dotted(func.value).lower()
        return bool(receiver) and not any(word in receiver for word in NOT_OPTIMIZERS)

    def does_training(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` runs a backward pass or optimizer step, directly or through calls
        (to this file's functions, or to the project's other files)."""
        key = ("training", id(node))
        if key not in self.memo:
            self.memo[key] = False  # a guard against calls that recurse across files
            regions = [node, *(fn.body for fn in self.reachable_functions(node))]
            calls = [c for region in regions for c in self.calls(region)]
            self.memo[key] = any(self.is_training_call(c) for c in calls) or any(
                q.does_training(fn.body)
                for c in calls
                if not self.callees(c)
                for q, fn in self.external(self, c)
            )
        return bool(self.memo[key])
