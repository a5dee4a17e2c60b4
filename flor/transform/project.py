"""The project an entry script belongs to: its own files, and the calls between them.

The main loop or its training step often lives in another file of
the project (``engine.train_one_epoch``, ``trainer.run()``, ``agent.update()``).
``Project`` holds the entry script and the project files it imports, transitively
(what a run records), and links a call in one file to the functions it reaches in
another, so that finding the main loop and its training work follows calls across
files. Which modules are the project's is the caller's ``resolve`` (it reads files;
this module does not): never the standard library or site-packages.

Linking is by what the source says, not by running it: ``import m``/``from m import f``
(absolute and relative) and ``from m import *``, ``m.f()``, ``f()``, and methods of instances
of the project's classes (``agent = PPO(...)`` or ``self.agent = PPO(...)``, then
``agent.update()``; down a chain, ``runner.agent.learn()``; what a factory returns,
``build_trainer(cfg).fit()``), their project bases included.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst

from flor.sources import ENTRY, SourceFile, python_ast
from flor.transform.program import FunctionNode, Program, dotted, node_of, root_name

# An absolute module name -> the project's file for it; None for any other module.
Resolve = Callable[[str], SourceFile | None]
_Target = tuple[str, str | None]  # an import binds a module (name None) or a name in one


class Project:
    def __init__(self, entry: SourceFile, resolve: Resolve) -> None:
        self.entry = entry
        self._resolve = resolve
        self._files: dict[str, SourceFile | None] = {ENTRY: entry}
        self._programs: dict[str, Program | None] = {}

    # -- files -------------------------------------------------------------------------
    def file(self, module: str) -> SourceFile | None:
        if module not in self._files:
            self._files[module] = self._resolve(module) if module else None
        return self._files[module]

    def closure(self) -> list[SourceFile]:
        """The entry script and every project file it imports, transitively."""
        seen: dict[str, SourceFile] = {}
        todo = [self.entry]
        while todo:
            f = todo.pop()
            if f.module in seen:
                continue
            seen[f.module] = f
            for name in _imported_modules(f):
                found = self.file(name)
                if found is not None and found.module not in seen:
                    todo.append(found)
        return [self.entry, *sorted((f for f in seen.values() if f is not self.entry), key=_path)]

    def program(self, module: str) -> Program | None:
        """The parsed file of ``module``; None if it is not the project's or does not parse."""
        try:
            return self.parse(module)
        except cst.ParserSyntaxError:
            return None

    def parse(self, module: str) -> Program | None:
        """``program``, raising libcst's error for a file that does not parse."""
        if module not in self._programs:
            self._programs[module] = None
            f = self.file(module)
            if f is None:
                return None
            p = Program(cst.parse_module(f.source), self.external, module)
            self._programs[module] = p
        return self._programs[module]

    # -- calls into other files ----------------------------------------------------------
    def external(self, p: Program, call: cst.Call) -> list[tuple[Program, FunctionNode]]:
        """The functions of the project's other files that ``call`` (in ``p``) may reach."""
        key = ("external", id(call))
        if key not in p.memo:
            p.memo[key] = self._link(p, call)
        return p.memo[key]  # type: ignore[return-value]

    def _link(self, p: Program, call: cst.Call) -> list[tuple[Program, FunctionNode]]:
        func = call.func
        if isinstance(func, cst.Attribute):
            name = func.attr.value
            symbol = self._symbol_of(p, func.value)
            if symbol is not None:  # pkg.mod.fn(): a name in a module
                return self._defined(symbol, name)
            return [m for cls in self._classes_of(p, func.value) for m in self._methods(*cls, name)]
        if isinstance(func, cst.Name):
            target = self._import_target(p, func)
            if target is not None and target[1] is not None:
                return self._defined(target, "__init__")
        return []

    def _defined(self, symbol: _Target, then: str) -> list[tuple[Program, FunctionNode]]:
        """What calling ``module.name`` runs: the function, a class's ``then`` method (its
        ``__init__``), or, for ``module.name`` naming a module, its function ``then``."""
        module, name = symbol
        if name is not None and self.file(f"{module}.{name}") is not None:
            module, name = f"{module}.{name}", None  # `from pkg import mod`; mod.fn()
        found = (
            self._definition(module, then, True) if name is None else self._definition(module, name)
        )
        out: list[tuple[Program, FunctionNode]] = []
        for q, node in found:
            if isinstance(node, cst.ClassDef):
                out.extend(self._methods(q, node, then))
            else:
                out.append((q, node))
        return out

    def _definition(
        self, module: str, name: str, functions_only: bool = False, depth: int = 0
    ) -> list[tuple[Program, FunctionNode | cst.ClassDef]]:
        """The top-level function (or class) ``name`` of ``module``, following re-exports."""
        q = self.program(module)
        if q is None or depth > 5:
            return []
        for stmt in q.module.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return [(q, stmt)]
            if isinstance(stmt, cst.ClassDef) and stmt.name.value == name and not functions_only:
                return [(q, stmt)]
        for node in q.walk(q.module):  # `from .engine import train_one_epoch` in __init__.py
            if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    bound = dotted(alias.asname.name) if alias.asname else dotted(alias.name)
                    if bound == name:
                        base = _from_module(self.file(module), node)
                        if base is not None:
                            return self._definition(
                                base, dotted(alias.name), functions_only, depth + 1
                            )
        star = self._star_target(q, name)  # `from .engine import *` in __init__.py
        if star is not None:
            return self._definition(star[0], name, functions_only, depth + 1)
        return []

    def _methods(
        self, q: Program, cls: cst.ClassDef, name: str, depth: int = 0
    ) -> list[tuple[Program, FunctionNode]]:
        """Method ``name`` of ``cls`` (in ``q``), or of the first project base that has it."""
        for stmt in getattr(cls.body, "body", ()):
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return [(q, stmt)]
        if depth > 5:
            return []
        for base in cls.bases:
            for where, base_cls in self._class_named(q, base.value):
                found = self._methods(where, base_cls, name, depth + 1)
                if found:
                    return found
        return []

    def _class_named(
        self, p: Program, expr: cst.BaseExpression
    ) -> list[tuple[Program, cst.ClassDef]]:
        """The project class ``expr`` names in ``p``: this file's, or an imported one."""
        if isinstance(expr, cst.Name):
            local = [
                s
                for s in p.module.body
                if isinstance(s, cst.ClassDef) and s.name.value == expr.value
            ]
            if local:
                return [(p, local[0])]
        symbol = self._symbol_of(p, expr)
        if symbol is None or symbol[1] is None:
            return []
        return [
            (q, n) for q, n in self._definition(symbol[0], symbol[1]) if isinstance(n, cst.ClassDef)
        ]

    def _classes_of(
        self, p: Program, receiver: cst.BaseExpression, depth: int = 0
    ) -> list[tuple[Program, cst.ClassDef]]:
        """The project classes ``receiver`` may be an instance of: ``Cls(...)`` itself or
        what a factory returns (``make_agent(cfg)``), a name bound (in its scope) to such a
        call, ``self.x`` that a method of the enclosing class binds to one
        (``self.agent = PPO(...)``), or ``obj.x`` that a method of ``obj``'s class binds to
        one."""
        if isinstance(receiver, cst.Call):
            return self._class_named(p, receiver.func) or self._made_by(p, receiver, depth)
        if isinstance(receiver, cst.Attribute):
            if dotted(receiver.value) == "self":
                owner = next(
                    (a for a in p.ancestors(receiver) if isinstance(a, cst.ClassDef)), None
                )
                owners = [] if owner is None else [(p, owner)]
            elif depth < 5:  # runner.agent: the classes Runner binds self.agent to
                owners = self._classes_of(p, receiver.value, depth + 1)
            else:
                return []
            attribute = receiver.attr.value
            return [
                c for q, cls in owners for c in self._attribute_classes(q, cls, attribute, depth)
            ]
        if not isinstance(receiver, cst.Name) or depth > 5:
            return []
        scope = p.scope(receiver)
        if scope is None or receiver.value not in scope:
            return []
        out = []
        for a in scope[receiver.value]:
            statement = p.parent(node_of(a))
            value = getattr(statement, "value", None)
            if isinstance(statement, (cst.AssignTarget, cst.AnnAssign)):
                value = getattr(p.parent(statement), "value", value)
            if isinstance(value, cst.Call):
                out.extend(self._classes_of(p, value, depth + 1))
        return out

    def _made_by(
        self, p: Program, call: cst.Call, depth: int
    ) -> list[tuple[Program, cst.ClassDef]]:
        """The project classes a factory function ``call`` reaches returns instances of
        (``return Trainer(cfg)``, or a name bound to one), in this file or another."""
        if depth >= 5 or not isinstance(call.func, cst.Name):
            return []
        here = [(p, f) for f in p.callees(call) if not p.is_method(f)]
        out = []
        for q, fn in here or self.external(p, call):
            for node in q.walk(fn):
                value = node.value if isinstance(node, cst.Return) else None
                if isinstance(value, (cst.Call, cst.Name)):
                    out.extend(self._classes_of(q, value, depth + 1))
        return out

    def _attribute_classes(
        self, p: Program, owner: cst.ClassDef, attribute: str, depth: int
    ) -> list[tuple[Program, cst.ClassDef]]:
        """The project classes that methods of ``owner`` (in ``p``) bind ``self.attribute``
        to instances of (``self.agent = PPO(...)``)."""
        out = []
        for node in p.walk(owner):
            if (
                isinstance(node, cst.Assign)
                and isinstance(node.value, cst.Call)
                and any(dotted(t.target) == f"self.{attribute}" for t in node.targets)
            ):
                out.extend(self._classes_of(p, node.value, depth + 1))
        return out

    def _symbol_of(self, p: Program, expr: cst.BaseExpression) -> _Target | None:
        """What an imported name, or a dotted chain from one, refers to: a module
        (``(module, None)``) or a name in a module; None for anything else."""
        root = root_name(expr)
        chain = dotted(expr)
        if root is None or not chain:
            return None
        target = self._import_target(p, root)
        if target is None:
            return None
        module, name = target
        parts = chain.split(".")[1:]
        if name is not None:
            parts = [name, *parts]
        for i, part in enumerate(parts):
            if self.file(f"{module}.{part}") is not None:
                module = f"{module}.{part}"
            elif i == len(parts) - 1:
                return module, part
            else:
                return None
        return module, None

    def _import_target(self, p: Program, name: cst.Name) -> _Target | None:
        """What an import binds ``name`` to where it is used; None if no import does."""
        scope = p.scope(name)
        if scope is None:
            return None
        if name.value not in scope or not scope[name.value]:
            return self._star_target(p, name.value)  # unbound here: `from m import *`?
        for a in scope[name.value]:
            node = node_of(a)
            if isinstance(node, cst.Import):
                for alias in node.names:
                    full = dotted(alias.name)
                    if alias.asname is not None:
                        if dotted(alias.asname.name) == name.value:
                            return full, None
                    elif full.split(".")[0] == name.value:
                        return name.value, None
            elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
                base = _from_module(self.file(p.name), node)
                for alias in node.names:
                    bound = dotted(alias.asname.name) if alias.asname else dotted(alias.name)
                    if base is not None and bound == name.value:
                        return base, dotted(alias.name)
        return None

    def _star_target(self, p: Program, name: str, depth: int = 0) -> _Target | None:
        """The module a ``from m import *`` of ``p`` takes ``name`` from (the last one wins,
        as at run time); None if none exports it."""
        for node in reversed(p.module.body):
            star = node.body[0] if isinstance(node, cst.SimpleStatementLine) else None
            if isinstance(star, cst.ImportFrom) and isinstance(star.names, cst.ImportStar):
                base = _from_module(self.file(p.name), star)
                if base is not None and self._exports(base, name, depth + 1):
                    return base, name
        return None

    def _exports(self, module: str, name: str, depth: int = 0) -> bool:
        """Whether ``from module import *`` binds ``name``: listed in its ``__all__`` if it
        has one, else a public name it defines or imports at top level."""
        q = self.program(module)
        if q is None or depth > 5:
            return False
        listed = _all_names(q.module)
        if listed is not None:
            return name in listed
        if name.startswith("_"):
            return False
        top = q.scope(q.module.body[0]) if q.module.body else None
        if top is not None and name in top and top[name]:
            return True
        return self._star_target(q, name, depth) is not None


def _all_names(module: cst.Module) -> set[str] | None:
    """The strings of a top-level ``__all__ = [...]`` (or tuple); None if there is none."""
    for stmt in module.body:
        assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
        if (
            isinstance(assign, cst.Assign)
            and any(dotted(t.target) == "__all__" for t in assign.targets)
            and isinstance(assign.value, (cst.List, cst.Tuple))
        ):
            return {
                e.value.evaluated_value
                for e in assign.value.elements
                if isinstance(e.value, cst.SimpleString)
                and isinstance(e.value.evaluated_value, str)
            }
    return None


def _path(f: SourceFile) -> str:
    return f.path


def _package(f: SourceFile | None) -> str:
    """The package a relative import in ``f`` starts from."""
    if f is None:
        return ""
    if f.module == ENTRY:
        return f.package or ""
    return f.module if f.is_package else f.module.rpartition(".")[0]


def _relative(f: SourceFile | None, level: int, module: str | None) -> str | None:
    if level == 0:
        return module
    parts = _package(f).split(".") if _package(f) else []
    if level - 1 > len(parts) or (level - 1 == len(parts) and not module and not parts):
        return None
    base = parts[: len(parts) - (level - 1)]
    if module:
        base.append(module)
    return ".".join(base) or None


def _from_module(f: SourceFile | None, node: cst.ImportFrom) -> str | None:
    module = dotted(node.module) if node.module is not None else None
    return _relative(f, len(node.relative), module)


def _imported_modules(f: SourceFile) -> list[str]:
    """Every module ``f``'s imports may load: ``a``, ``a.b`` of ``import a.b``; ``m`` and
    ``m.x`` of ``from m import x`` (``x`` may be a submodule)."""
    try:
        tree = python_ast(f.source)
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                out.extend(".".join(parts[: i + 1]) for i in range(len(parts)))
        elif isinstance(node, ast.ImportFrom):
            base = _relative(f, node.level, node.module)
            if base is None:
                continue
            parts = base.split(".")
            out.extend(".".join(parts[: i + 1]) for i in range(len(parts)))
            out.extend(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return out
