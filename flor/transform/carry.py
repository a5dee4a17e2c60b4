"""An edit carried to older versions of a file, for hindsight across a run's past versions.

``edit_of`` aligns an edited file with the version it was edited from, suite by suite (a
module's statements, a loop's body, a function's body, an ``else``): simple statements
match by their code, compound ones by their header, formatting and comments aside. What
the edited file has beyond the matched statements is the edit, kept as groups of added
statements, each with its anchor: the headers of its enclosing statements and its nearest
matched neighbours. ``carry`` finds each anchor in an older version of the file and
inserts the group there (libcst keeps the older file's own indentation), or says in one
line why it cannot: the enclosing statement or both neighbours are gone, or the group
reads a name the older version does not bind where it would run.
"""

from __future__ import annotations

import ast
import builtins
import copy
import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from flor.errors import FlorError

Statements = Sequence[cst.BaseStatement]
_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__"}


@dataclass(frozen=True)
class Enclosing:
    """One statement around an added group: its header's key, which of its suites holds
    the group (``body`` or ``else``), and how a user reads it."""

    key: str
    loose: str  # a weaker key (the loop variable, the function's name) for a changed header
    suite: str
    shown: str


@dataclass(frozen=True)
class Added:
    """Statements the edit adds next to each other, and where they belong."""

    statements: tuple[cst.BaseStatement, ...]
    where: tuple[Enclosing, ...]
    neighbours: tuple[str, ...]  # keys of the suite's statements the base has too, in order
    at: int  # the group goes before neighbours[at]
    reads: frozenset[str]
    shown: str  # its first line, for messages


@dataclass(frozen=True)
class Edit:
    """What an edited file adds to the version it was edited from; ``pure``: nothing else
    changed (no statement removed or rewritten), so that version is where it came from."""

    added: tuple[Added, ...]
    pure: bool


@dataclass(frozen=True)
class Carried:
    """An older version with the edit inserted, or why it could not be (``refused``)."""

    source: str
    refused: str | None = None


def edit_of(base: str, edited: str, filename: str) -> Edit:
    """The statements ``edited`` adds to ``base``, with their anchors."""
    old, new = _parse(base, filename), _parse(edited, filename)
    found: list[Added] = []
    pure = _align(old, new, old.body, new.body, (), found)
    return Edit(tuple(found), pure)


def carry(edit: Edit, older: str, filename: str) -> Carried:
    """``older`` with every group of ``edit`` inserted at its anchor; refused as a whole
    when any group has no place in it (a partial edit would print a different log)."""
    module = _parse(older, filename)
    for added in edit.added:
        placed = _place(module, added)
        if isinstance(placed, str):
            return Carried(older, f"`{added.shown}` cannot be carried: {placed}")
        module = placed
    return Carried(module.code)


def _parse(source: str, filename: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise FlorError("syntax", f"{filename}:{e.raw_line}: cannot parse: {e.message}") from None


# -- keys: a statement as code, formatting and comments aside ------------------------------


def _code(module: cst.Module, node: cst.CSTNode) -> ast.Module:
    return ast.parse(module.code_for_node(node).strip("\n"))


def _suites(node: cst.CSTNode) -> dict[str, Statements]:
    """The statement lists directly under ``node`` that alignment looks into."""
    if isinstance(node, cst.Module):
        return {"body": node.body}
    found: dict[str, Statements] = {}
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        found["body"] = body.body
    orelse = getattr(node, "orelse", None)
    if isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock):
        found["else"] = orelse.body.body
    return found


def _header(module: cst.Module, node: cst.BaseStatement) -> ast.Module:
    """The statement's code with the suites alignment looks into left empty."""
    tree = _code(module, node)
    if len(tree.body) != 1:
        return tree
    stmt = copy.copy(tree.body[0])
    for suite in _suites(node):
        setattr(stmt, "orelse" if suite == "else" else "body", [])
    return ast.Module(body=[stmt], type_ignores=[])


def _key(module: cst.Module, node: cst.BaseStatement) -> str:
    return ast.dump(_header(module, node))


def _loose(module: cst.Module, node: cst.BaseStatement) -> str:
    """A loop's variable, or a function's or class's name: it still finds a loop whose range
    or a function whose arguments changed. Other statements (an ``if``, a ``with``) only by
    their whole header: another ``if`` is another place."""
    stmt = _header(module, node).body[0]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return f"for {ast.unparse(stmt.target)}"
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return f"def {stmt.name}"
    return _key(module, node)


def _shown(module: cst.Module, node: cst.BaseStatement) -> str:
    """The statement's first line of code (its comments above it left out)."""
    lines = module.code_for_node(node).splitlines()
    return next((s.strip() for s in lines if s.strip() and not s.strip().startswith("#")), "")


# -- alignment: the edited file against its base ------------------------------------------


def _align(
    old: cst.Module,
    new: cst.Module,
    before: Statements,
    after: Statements,
    where: tuple[Enclosing, ...],
    found: list[Added],
) -> bool:
    """Collect the groups ``after`` adds to ``before`` (and, recursively, to the suites of
    the compound statements both have); whether nothing else changed."""
    old_keys = [_key(old, s) for s in before]
    new_keys = [_key(new, s) for s in after]
    matcher = difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False)
    pure = True
    matched = [
        j for tag, _, _, j1, j2 in matcher.get_opcodes() if tag == "equal" for j in range(j1, j2)
    ]
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "insert":
            found.append(_added(new, after, j1, j2, new_keys, matched, where))
        elif tag != "equal":
            pure = False
        else:
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                pure &= _align_inside(old, new, before[i], after[j], where, found)
    return pure


def _align_inside(
    old: cst.Module,
    new: cst.Module,
    was: cst.BaseStatement,
    now: cst.BaseStatement,
    where: tuple[Enclosing, ...],
    found: list[Added],
) -> bool:
    old_suites, new_suites = _suites(was), _suites(now)
    if set(old_suites) != set(new_suites):
        return False
    pure = True
    for suite, statements in new_suites.items():
        here = Enclosing(_key(new, now), _loose(new, now), suite, _shown(new, now))
        pure &= _align(old, new, old_suites[suite], statements, (*where, here), found)
    return pure


def _added(
    module: cst.Module,
    suite: Statements,
    start: int,
    stop: int,
    keys: list[str],
    matched: list[int],
    where: tuple[Enclosing, ...],
) -> Added:
    statements = tuple(suite[start:stop])
    reads, binds = set[str](), set[str]()
    for s in statements:
        tree = _code(module, s)
        reads |= {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        binds |= _bound_by(tree.body)
    return Added(
        statements,
        where,
        tuple(keys[j] for j in matched),
        sum(j < start for j in matched),
        frozenset(reads - binds - _BUILTINS),
        _shown(module, statements[0]),
    )


# -- carrying: the anchor found in an older version ----------------------------------------


def _place(module: cst.Module, added: Added) -> cst.Module | str:
    """``module`` with ``added`` inserted, or why it has no place there."""
    steps: list[tuple[int, str]] = []  # (the enclosing statement's index, which suite of it)
    suite: Statements = module.body
    scopes: list[Statements] = [module.body]
    defs: list[cst.FunctionDef] = []
    for enclosing in added.where:
        index = _find_enclosing(module, suite, enclosing)
        if index is None:
            return f"its enclosing `{enclosing.shown}` is not in this version"
        node = suite[index]
        steps.append((index, enclosing.suite))
        suite = _suites(node).get(enclosing.suite, ())
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):  # a new scope
            scopes.append(suite)
        if isinstance(node, cst.FunctionDef):
            defs.append(node)
    at = _position(module, suite, added)
    if at is None:
        return "no statement next to it is in this version"
    missing = sorted(added.reads - _visible(module, scopes, defs))
    if missing:
        return f"it reads {', '.join(missing)}, which this version does not define there"

    def insert(statements: Statements) -> Statements:
        return (*statements[:at], *added.statements, *statements[at:])

    return module.with_changes(body=_rebuilt(module.body, steps, insert))


def _find_enclosing(module: cst.Module, suite: Statements, enclosing: Enclosing) -> int | None:
    """The one compound statement of ``suite`` with the same header (else the same kind and
    name), or None."""
    for strength, want in ((_key, enclosing.key), (_loose, enclosing.loose)):
        hits = [i for i, s in enumerate(suite) if _suites(s) and strength(module, s) == want]
        if len(hits) == 1:
            return hits[0]
    return None


def _position(module: cst.Module, suite: Statements, added: Added) -> int | None:
    """Where the group goes in ``suite``: below the nearest neighbour above it that this
    version has, else above the nearest one below it. Neighbours align by code, and a
    statement this version has in another form (a changed call) stands in for it where the
    two sit at the same place between aligned ones."""
    keys = [_key(module, s) for s in suite]
    matcher = difflib.SequenceMatcher(None, list(added.neighbours), keys, autojunk=False)
    aligned: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            aligned.update(zip(range(i1, i2), range(j1, j2), strict=True))
    for k in range(added.at - 1, -1, -1):
        if k in aligned:
            return aligned[k] + 1
    for k in range(added.at, len(added.neighbours)):
        if k in aligned:
            return aligned[k]
    return None


def _visible(module: cst.Module, scopes: list[Statements], defs: list[cst.FunctionDef]) -> set[str]:
    """Names bound in the module and the functions (or class) around the insertion point:
    what a statement placed there can read, built-ins aside."""
    names = set[str]()
    for scope in scopes:
        names |= _bound_by([stmt for s in scope for stmt in _code(module, s).body])
    for node in defs:
        tree = _code(module, node).body[0]
        names |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    return names


def _bound_by(statements: list[ast.stmt]) -> set[str]:
    """Names these statements bind in their own scope (not inside functions they define)."""
    names = set[str]()
    pending: list[ast.AST] = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names |= set(node.names)
        pending.extend(ast.iter_child_nodes(node))
    return names


def _rebuilt(
    suite: Statements, steps: list[tuple[int, str]], change: Callable[[Statements], Statements]
) -> Statements:
    """``suite`` with the suite ``steps`` lead to changed by ``change``."""
    if not steps:
        return change(suite)
    (index, which), rest = steps[0], steps[1:]
    node = suite[index]
    inner = _rebuilt(_suites(node)[which], rest, change)
    if which == "else":
        orelse = node.orelse  # type: ignore[attr-defined]
        node = node.with_changes(
            orelse=orelse.with_changes(body=orelse.body.with_changes(body=inner))
        )
    else:
        node = node.with_changes(body=node.body.with_changes(body=inner))  # type: ignore[attr-defined]
    return (*suite[:index], node, *suite[index + 1 :])
