"""Where an edit's statements run: the conditions a sparse replay evaluates per iteration.

The recorded and the edited script are compared statement by statement (their
syntax trees, so formatting and comments do not count). Each statement of the
main loop's body (the ``for`` over ``flor.it``) that was added, changed or
removed runs only where the ``if`` tests around it hold. When every such test
reads only plain values a replay can know for each iteration without running
it, replay runs just the iterations where some test holds and prints the
others' recorded output (``flor.replay.triggers``). The values it can know:

- the loop's own value (``step`` of ``for step in flor.it(range(n))``, ``i`` of
  ``enumerate``), recorded per iteration;
- counters the loop body advances by a constant, unconditionally
  (``iter_num += 1``), from their recorded value at the iteration's start;
- names the loop never assigns (``eval_interval``, ``master_process``), and
  attributes nothing in the file assigns (``args.log_interval``).

Anything else (a test that calls a function, reads the loss, or a counter
advanced under a condition), an edit without a condition, or a changed function
makes every iteration run, as without this analysis. An edit after the loop
needs the loop's end state, so the last iteration runs too.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from flor.errors import FlorError
from flor.sources import python_ast
from flor.transform import trainers
from flor.transform.fingerprints import block_name, is_skipblock_call, parse

# Nodes a condition may consist of: arithmetic, comparisons and boolean logic on names.
_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.IfExp,
    ast.Name,
    ast.Attribute,
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.Load,
    ast.boolop,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass(frozen=True)
class Condition:
    test: str  # the ``if`` test, as source
    holds: bool  # False: the statement is in its ``else``
    line: int
    names: tuple[str, ...] = ()  # the variables it reads
    shifts: tuple[tuple[str, int], ...] = ()  # counter -> increments run before the test


@dataclass(frozen=True)
class Hindsight:
    """What a replay must run of the main loop, per iteration."""

    guards: tuple[tuple[Condition, ...], ...] = ()  # each edited statement runs where all hold
    dense: str | None = None  # why every iteration must run (None: only where guards hold)
    expected: bool = True  # dense for a reason worth no warning (an edit with no condition)
    after_loop: bool = False  # code after the loop changed: its end state is needed
    scope: str = "<module>"  # the function whose frame runs the loop
    targets: tuple[tuple[str, str], ...] = ()  # loop variable -> its recorded key ("@", "@0")
    counters: frozenset[str] = field(default_factory=frozenset)  # values the body advances
    steps: tuple[tuple[str, int], ...] = ()  # counter -> how much one pass advances it

    @property
    def sparse(self) -> bool:
        return self.dense is None


@dataclass(frozen=True)
class _Change:
    node: ast.AST
    chain: tuple[tuple[ast.AST, str], ...]  # enclosing (node, field) pairs, outermost first
    added: bool  # False: removed (node and chain are the recorded tree's)


def analyze(recorded: str, edited: str, filename: str = "<script>") -> Hindsight:
    """Where ``edited``'s differences from ``recorded`` run in the main loop."""
    old = parse(recorded, filename + " (recorded)")
    new = parse(edited, filename)
    old_loop, new_loop = _main_loop(old), _main_loop(new)
    if old_loop is None or new_loop is None:
        if trainers.used([new]):  # a hook: the library's loop calls it in every epoch
            return Hindsight(dense="the loop is a library trainer's", expected=True)
        return Hindsight(dense="not one flor.it loop in the script", expected=False)
    changes: list[_Change] = []
    _diff(old.body, new.body, (), (), changes)
    old_names = {n.name for n in ast.walk(old) if isinstance(n, _SCOPES[:3])}
    loops = {True: _Loop(new, new_loop), False: _Loop(old, old_loop)}
    if loops[True].steps != loops[False].steps:
        return Hindsight(
            dense="the edit changes how the loop advances its counters", expected=False
        )
    guards: list[tuple[Condition, ...]] = []
    after = False
    for change in changes:
        loop = loops[change.added]  # a removed line's tests and increments: the record's
        where = _place(change, loop.loop, old_names)
        if where == "loop":
            for conditions in _guards(change, loop.loop):
                if not conditions:
                    line = getattr(change.node, "lineno", 0)
                    return Hindsight(dense=f"line {line} runs in every iteration", expected=True)
                resolved = [loop.resolve(c) for c in conditions]
                problem = next((r for r in resolved if isinstance(r, str)), None)
                if problem is not None:
                    return Hindsight(dense=problem, expected=False)
                guards.append(tuple(c for c in resolved if isinstance(c, Condition)))
        elif where == "after":
            after = True
        elif where != "before":
            return Hindsight(dense=where, expected=False)
    return loops[True].analysis(tuple(guards), after)


def analyze_project(
    recorded: Mapping[str, str], edited: Mapping[str, str], entry: str
) -> Hindsight:
    """``analyze`` for a project (path -> source, as recorded and as edited): on the file
    that holds the main loop. An edit in any other file runs every iteration: where it
    runs in the loop is not followed across files."""
    where = loop_file(edited, entry)
    if where not in recorded:
        return Hindsight(dense=f"{where} was not recorded", expected=False)
    after = False
    for path in sorted(recorded.keys() | edited.keys()):
        if path == where or _same_code(recorded.get(path), edited.get(path)):
            continue
        if path == entry and _top_level_only(recorded[path], edited[path]):
            after = True  # the script's own statements run before or after the loop, never in it
            continue
        return Hindsight(
            dense=f"{path} changed, outside the main loop's file ({where})", expected=False
        )
    found = analyze(recorded[where], edited[where], where)
    return replace(found, after_loop=True) if after and found.sparse else found


_DEFINES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _top_level_only(recorded: str, edited: str) -> bool:
    """Whether ``edited`` differs from ``recorded`` only in module-level statements that
    define nothing (no function, class or lambda a loop elsewhere could call back)."""
    try:
        old, new = python_ast(recorded).body, python_ast(edited).body
    except SyntaxError:
        return False
    a, b = [ast.dump(s) for s in old], [ast.dump(s) for s in new]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        changed = [*old[i1:i2], *new[j1:j2]]
        if any(isinstance(n, _DEFINES) for s in changed for n in ast.walk(s)):
            return False
    return True


def loop_file(files: Mapping[str, str], entry: str) -> str:
    """The file of ``files`` (path -> source) with the ``flor.it`` loop: ``entry`` unless
    exactly one other file has one."""
    if "flor.it(" in files.get(entry, "flor.it("):
        return entry
    found = [p for p, s in files.items() if "flor.it(" in s and _has_main_loop(s, p)]
    return found[0] if len(found) == 1 else entry


def _has_main_loop(source: str, path: str) -> bool:
    try:
        return _main_loop(parse(source, path)) is not None
    except FlorError:
        return False


def _same_code(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except SyntaxError:
        return a == b


def loop_assigned(source: str, filename: str = "<script>") -> frozenset[str] | None:
    """The names the main loop can rebind: its body's (and its variable's), and any a
    function declares ``global``/``nonlocal``. None when there is not one ``flor.it`` loop."""
    tree = parse(source, filename)
    found = _main_loop(tree)
    return None if found is None else _rebindable(tree, found[0])


def _rebindable(tree: ast.Module, loop: ast.For) -> frozenset[str]:
    targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return frozenset(_assigned(loop.body) | targets | _globals_assigned(tree))


def _main_loop(tree: ast.Module) -> tuple[ast.For, str] | None:
    """The one ``for ... in flor.it(...)`` loop, and the name of the function it is in."""
    found: list[tuple[ast.For, str]] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.For) and _is_flor_it(child.iter):
                found.append((child, scope))
            inner = child.name if isinstance(child, _SCOPES[:2]) else scope
            visit(child, inner)

    visit(tree, "<module>")
    return found[0] if len(found) == 1 else None


def _is_flor_it(expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    if isinstance(func, ast.Attribute):
        return func.attr == "it" and isinstance(func.value, ast.Name) and func.value.id == "flor"
    return isinstance(func, ast.Name) and func.id == "it"


def _diff(
    old: list[ast.stmt],
    new: list[ast.stmt],
    old_chain: tuple[tuple[ast.AST, str], ...],
    new_chain: tuple[tuple[ast.AST, str], ...],
    out: list[_Change],
) -> None:
    a, b = [_key(s) for s in old], [_key(s) for s in new]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for o, n in zip(old[i1:i2], new[j1:j2]):
                if _same_header(o, n):
                    for name in _BODIES:
                        if isinstance(getattr(o, name, None), list):
                            inner_old, inner_new = (*old_chain, (o, name)), (*new_chain, (n, name))
                            _diff(getattr(o, name), getattr(n, name), inner_old, inner_new, out)
                else:
                    out.append(_Change(o, old_chain, added=False))
                    out.append(_Change(n, new_chain, added=True))
            continue
        out.extend(_Change(o, old_chain, added=False) for o in old[i1:i2])
        out.extend(_Change(n, new_chain, added=True) for n in new[j1:j2])


_BODIES = ("body", "orelse", "finalbody")


def _key(stmt: ast.stmt) -> str:
    """What the diff compares. ``SkipBlock.end(...)`` is flor's own line: what it carries may
    change with an edit (the plan checks the checkpoints hold it), not what the loop does."""
    return "SkipBlock.end" if _is_end_call(stmt) else ast.dump(stmt)


def _same_header(a: ast.stmt, b: ast.stmt) -> bool:
    """Same kind of statement, equal but for its statement lists (which the diff enters)."""
    if type(a) is not type(b) or isinstance(a, (ast.Try, ast.Match)):
        return False  # handlers and cases: compared whole
    for name, value in ast.iter_fields(a):
        if name not in _BODIES and _dumped(value) != _dumped(getattr(b, name)):
            return False
    return True


def _dumped(value: object) -> object:
    if isinstance(value, ast.AST):
        return ast.dump(value)
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    return value


def _place(change: _Change, loop: ast.For, old_names: set[str]) -> str:
    """``loop``, ``before``, ``after`` (the main loop's code), or why it is neither."""
    node = change.node
    if any(isinstance(n, ast.For) and _is_flor_it(n.iter) for n in ast.walk(node)):
        return "the main loop's own line changed"
    fields = {id(n): f for n, f in change.chain}
    if id(loop) in fields:
        if isinstance(node, _SCOPES):
            return f"a definition in the loop changed (line {node.lineno})"
        return "loop" if fields[id(loop)] == "body" else "after"
    for outer in [*(n for n, _ in change.chain), node]:
        if isinstance(outer, _SCOPES) and not _contains(outer, loop):
            if outer is node and change.added and getattr(node, "name", None) not in old_names:
                return "before"  # a new function for the new lines: defining it changes nothing
            kind = "class" if isinstance(outer, ast.ClassDef) else "function"
            return f"{kind} {getattr(outer, 'name', '')} changed"
    return "before" if getattr(node, "lineno", 0) < loop.lineno else "after"


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def _guards(change: _Change, loop: ast.For) -> list[tuple[Condition, ...]]:
    """Where a changed statement runs: under its enclosing tests and, for a new ``if``
    (whose test alone runs every iteration), under its own test too."""
    around = _conditions(change, loop)
    node = change.node
    if not isinstance(node, ast.If) or block_name(node.test) is not None:
        return [around]
    test = ast.unparse(node.test)
    branches = ((node.body, True), (node.orelse, False))
    return [(*around, Condition(test, holds, node.test.lineno)) for b, holds in branches if b]


def _conditions(change: _Change, loop: ast.For) -> tuple[Condition, ...]:
    """The ``if`` tests between the loop's body and the changed statement."""
    out = []
    inside = False
    for node, field_name in change.chain:
        if node is loop:
            inside = True
            continue
        if inside and isinstance(node, ast.If) and block_name(node.test) is None:
            out.append(Condition(ast.unparse(node.test), field_name == "body", node.test.lineno))
    return tuple(out)


class _Loop:
    """What the main loop's code says about the values its conditions read."""

    def __init__(self, tree: ast.Module, found: tuple[ast.For, str]) -> None:
        self.loop, self.scope = found
        self.targets = _targets(self.loop.target)
        self.assigned = _assigned(self.loop.body)
        self.counters = _counters(self.loop.body)
        self.unknowable = _globals_assigned(tree)
        self.attributes = _attributes_assigned(tree)
        self.steps = tuple(sorted((n, sum(s for _, s in v)) for n, v in self.counters.items()))

    def resolve(self, c: Condition) -> Condition | str:
        """``c`` with what it reads and the increments before it; or why it is unknowable."""
        expr = ast.parse(c.test, mode="eval")
        why = _unknowable(
            expr, self.targets, self.assigned, self.counters, self.unknowable, self.attributes
        )
        if why is not None:
            return f"line {c.line}: `{c.test}` {why}"
        names = _names(expr)
        shifts = tuple(
            (name, sum(step for line, step in self.counters[name] if line < c.line))
            for name in sorted(names & self.counters.keys())
        )
        return Condition(c.test, c.holds, c.line, tuple(sorted(names)), shifts)

    def analysis(self, guards: tuple[tuple[Condition, ...], ...], after: bool) -> Hindsight:
        return Hindsight(
            guards=guards,
            after_loop=after,
            scope=self.scope,
            targets=tuple(sorted(self.targets.items())),
            counters=frozenset(self.counters),
            steps=self.steps,
        )


def periodic(source: str, filename: str = "<script>") -> Hindsight:
    """The main loop's own ``if`` tests that a recording can evaluate one iteration ahead
    (its evaluation and logging branches): where hindsight lines will go. Its ``counters``
    are the only values of the loop a recording needs to note: a test that reads any other
    name the loop assigns is not evaluated from the record (``_unknowable``)."""
    tree = parse(source, filename)
    found = _main_loop(tree)
    if found is None:
        return Hindsight(dense="not one flor.it loop in the script")
    loop = _Loop(tree, found)
    tests = [
        node
        for node in _walk_scope(found[0].body)
        if isinstance(node, ast.If) and block_name(node.test) is None
    ]
    resolved = [loop.resolve(Condition(ast.unparse(t.test), True, t.test.lineno)) for t in tests]
    guards = tuple((c,) for c in resolved if isinstance(c, Condition))
    return loop.analysis(tuple(sorted(guards, key=lambda g: g[0].line)), after=False)


def _targets(target: ast.expr) -> dict[str, str]:
    if isinstance(target, ast.Name):
        return {target.id: "@"}
    if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
        return {target.elts[0].id: "@0"}
    return {}


def _names(expr: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def _unknowable(
    expr: ast.Expression,
    targets: dict[str, str],
    assigned: set[str],
    counters: dict[str, list[tuple[int, int]]],
    globals_assigned: set[str],
    attributes: set[str],
) -> str | None:
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            return f"calls {ast.unparse(node.func)}(), which only running the iteration can tell"
        if not isinstance(node, _ALLOWED):
            return f"is more than arithmetic on counters ({ast.unparse(node)})"
        if isinstance(node, ast.Attribute) and ({node.attr, "*"} & attributes):
            return f"reads .{node.attr}, which the script may assign"
    for name in sorted(_names(expr)):
        if name in globals_assigned:
            return f"reads {name}, which a function assigns"
        if name in targets:
            if name in assigned:
                return f"reads {name}, which the loop body reassigns"
        elif name in assigned and name not in counters:
            return f"reads {name}, which the loop body assigns"
    return None


def _assigned(body: list[ast.stmt]) -> set[str]:
    """Names the loop body binds, nested functions and comprehensions left out."""
    out: set[str] = set()
    for node in _walk_scope(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, _SCOPES[:3]):
            out.add(node.name)
    return out


def _walk_scope(body: list[ast.stmt]) -> list[ast.AST]:
    """The nodes of ``body`` in its own scope. ``x, y = SkipBlock.end(x=x, y=y)`` is left
    out: in a full run it rebinds each name to its own value."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if _is_end_call(node):
            continue
        out.append(node)
        if isinstance(node, (*_SCOPES, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _is_end_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and is_skipblock_call(node.value, "end")


def _counters(body: list[ast.stmt]) -> dict[str, list[tuple[int, int]]]:
    """Names the body advances by a constant on every pass, and only so: name -> (line, step)."""
    steps: dict[str, list[tuple[int, int]]] = {}
    for stmt in _unconditional(body):
        if (
            isinstance(stmt, ast.AugAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(stmt.op, (ast.Add, ast.Sub))
            and isinstance(stmt.value, ast.Constant)
            and type(stmt.value.value) is int
        ):
            step = stmt.value.value if isinstance(stmt.op, ast.Add) else -stmt.value.value
            steps.setdefault(stmt.target.id, []).append((stmt.lineno, step))
    everywhere = _stores(body)
    return {n: s for n, s in steps.items() if everywhere.get(n, 0) == len(s)}


def _unconditional(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements every pass runs: the body's own, and those of its blocks and ``with``s."""
    out = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.With) or (
            isinstance(stmt, ast.If) and block_name(stmt.test) is not None
        ):
            out.extend(_unconditional(stmt.body))
    return out


def _stores(body: list[ast.stmt]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in _walk_scope(body):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def _globals_assigned(tree: ast.Module) -> set[str]:
    """Names some function declares ``global``/``nonlocal``: calls may change them."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


def _attributes_assigned(tree: ast.Module) -> set[str]:
    out = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del))
    }
    for n in ast.walk(tree):  # setattr(obj, "name", ...)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
            if len(n.args) > 1 and isinstance(n.args[1], ast.Constant):
                out.add(str(n.args[1].value))
            else:
                out.add("*")
    return out
