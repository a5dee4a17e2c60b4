"""Block fingerprints: which SkipBlocks an edit touched (docs/how-it-works.md, Replaying).

A block is the body of ``if <...>SkipBlock.step_into("name", ...):``. Its
fingerprint covers the body's syntax tree (so formatting and comments do not
count) and, transitively, every function or method defined in the same file
that the body calls by name. Replay compares the recorded script's fingerprints
with the edited script's: a block whose fingerprint changed is probed. A library
trainer's block (``flor.frameworks``) has no body in the project: its fingerprint
covers the project's functions named like the hooks it calls.
"""

from __future__ import annotations

import ast
import hashlib
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flor.errors import FlorError
from flor.sources import python_ast
from flor.transform import trainers


@dataclass(frozen=True)
class BlockChanges:
    changed: frozenset[str]
    missing: frozenset[str]  # recorded, but gone from the edited script
    added: frozenset[str]
    ends: dict[str, EndCall] = field(default_factory=dict)  # the edited script's end() calls
    recorded_ends: dict[str, EndCall] = field(default_factory=dict)


def parse(source: str, filename: str) -> ast.Module:
    try:
        return python_ast(source)
    except SyntaxError as e:
        raise FlorError(
            "syntax", f"{filename}:{e.lineno}:{e.offset}: cannot parse: {e.msg}"
        ) from None


def is_skipblock_call(expr: ast.AST, method: str) -> bool:
    """Whether ``expr`` is ``<...>SkipBlock.<method>(...)``."""
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute):
        return False
    owner = expr.func.value
    owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
    return expr.func.attr == method and owner_name == "SkipBlock"


def block_name(test: ast.expr) -> str | None:
    """``"name"`` if ``test`` is ``<...>SkipBlock.step_into("name", ...)``."""
    if not isinstance(test, ast.Call) or not is_skipblock_call(test, "step_into") or not test.args:
        return None
    first = test.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def block_openings(sources: Iterable[str]) -> frozenset[str]:
    """The first statement of every block in ``sources`` (instrumented, as recorded), as
    ``normalized`` code: where a replay's blocks should begin too."""
    found = set()
    for source in sources:
        try:
            tree = python_ast(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and block_name(node.test) is not None and node.body:
                found.add(ast.unparse(node.body[0]))
    return frozenset(found)


def normalized(code: str) -> str | None:
    """``code`` (one statement) as ``block_openings`` spells it; None if it is not one."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return None
    return ast.unparse(tree.body[0]) if len(tree.body) == 1 else None


# ``model(x)`` calls ``forward`` without naming it: count it as called by every block.
_IMPLICIT_CALLS = frozenset({"forward", "__call__"})


def _referenced_names(nodes: list[ast.stmt]) -> set[str]:
    """Names ``nodes`` call or refer to: a function passed along (``optimizer.step(closure)``,
    a callback) runs where it is called, which may be inside a block."""
    names = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                names.add(sub.attr)
    return names


SPAWNERS = ("spawn", "start_processes")  # torch.multiprocessing's: fn(rank, *args), N processes


def _spawned(call: ast.Call) -> ast.expr | None:
    """``main_worker`` of ``mp.spawn(main_worker, ...)`` (or ``fn=main_worker``): a call of
    it, in other processes."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in SPAWNERS:
        return None
    given = [k.value for k in call.keywords if k.arg == "fn"]
    return given[0] if given else (call.args[0] if call.args else None)


@dataclass(frozen=True)
class Escapes:
    """Functions referred to other than by calling them (``set_callback("on_batch_end", fn)``,
    ``collate_fn=collate``): any block may end up calling them."""

    anywhere: frozenset[str]
    # Of those, the ones only ever handed to the project's own functions (a trainer's
    # ``set_callback``), name -> the first such function: ``flor run`` notes which blocks
    # run them (``flor.callback``), so an edit to one leaves the blocks that never did alone.
    handed: dict[str, str]
    sites: str  # the calls handing them over: a changed registration changes every block


def escapes(trees: list[ast.Module], functions: dict[str, list[ast.AST]]) -> Escapes:
    """The functions of ``functions`` that ``trees`` refer to without calling them."""
    calls = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Call)]
    called = {id(n.func) for n in calls} | {id(t) for n in calls if (t := _spawned(n))}
    into: dict[int, tuple[str, ast.Call]] = {}  # an argument of a call of a project function
    for call in calls:
        callee = _name(call.func)
        if callee in functions:
            for arg in (*call.args, *(k.value for k in call.keywords)):
                into[id(arg)] = (callee, call)
    anywhere: set[str] = set()
    elsewhere: set[str] = set()
    handed: dict[str, str] = {}
    sites: list[str] = []
    for tree in trees:
        for n in ast.walk(tree):
            if id(n) in called or not isinstance(getattr(n, "ctx", None), ast.Load):
                continue
            name = _name(n)
            if name not in functions:
                continue
            anywhere.add(name)
            if id(n) in into:
                callee, call = into[id(n)]
                handed.setdefault(name, callee)
                sites.append(ast.dump(call))
            else:
                elsewhere.add(name)
    kept = {name: callee for name, callee in handed.items() if name not in elsewhere}
    return Escapes(frozenset(anywhere), kept, "".join(sorted(sites)))


@dataclass(frozen=True)
class Seen:
    """What a recording noted of the handed functions (``flor.callback``)."""

    noted: frozenset[str]  # the ones it noted: decorated where they were defined
    ran: Mapping[str, frozenset[str]]  # block name -> those of them it ran


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)


def handed_functions(files: Mapping[str, str]) -> dict[str, str]:
    """The functions of the project's ``files`` handed only to its own functions (a
    callback), name -> the function it is handed to: what ``flor run`` notes."""
    trees = [python_ast(source) for _, source in sorted(files.items())]
    return escapes(trees, _functions(trees)).handed


def _functions(trees: list[ast.Module]) -> dict[str, list[ast.AST]]:
    found: dict[str, list[ast.AST]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.setdefault(node.name, []).append(node)
    return found


def fingerprints(source: str, filename: str = "<script>") -> dict[str, str]:
    """Block name -> fingerprint of its body and the same-file functions it calls."""
    return project_fingerprints({filename: source})


def project_fingerprints(
    files: Mapping[str, str], label: str = "", seen: Seen | None = None
) -> dict[str, str]:
    """Block name -> fingerprint of its body and the functions it may call, from any of the
    project's ``files`` (path -> source): by name, so an edit to a function of that name
    anywhere counts. Bodies are hashed in path order; ``label`` marks paths in errors.
    ``seen``: which handed functions (``escapes``) a recording saw each block run; without
    it, a block may run any of them."""
    trees = [parse(files[path], path + label) for path in sorted(files)]
    functions = _functions(trees)
    bodies: dict[str, list[ast.stmt]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and (name := block_name(node.test)) is not None:
                bodies.setdefault(name, []).extend(node.body)
    escaped = escapes(trees, functions)
    roots = {name: _referenced_names(body) for name, body in bodies.items()}
    digests = {
        name: hashlib.sha256(ast.dump(ast.Module(body=body, type_ignores=[])).encode())
        for name, body in bodies.items()
    }
    used = {} if bodies else trainers.used(trees)  # a library's loop, where the project has none
    for framework, calls in used.items():  # its block lives in the library
        roots[framework.block] = set(calls)
        digests[framework.block] = hashlib.sha256(framework.block.encode())
    result = {}
    for name, digest in digests.items():
        digest.update(escaped.sites.encode())
        reach = escaped.anywhere
        if seen is not None:  # the noted ones it never ran are out of its reach
            noted = escaped.handed.keys() & seen.noted
            reach = reach - (noted - seen.ran.get(name, frozenset()))
        result[name] = _closure(digest, roots[name] | _IMPLICIT_CALLS | reach, functions)
    return result


def _closure(digest: Any, names: set[str], functions: dict[str, list[ast.AST]]) -> str:
    """``digest`` updated with every function ``names`` reach, transitively, by name."""
    seen: set[str] = set()
    todo = sorted(names)
    while todo:
        callee = todo.pop()
        if callee in seen or callee not in functions:
            continue
        seen.add(callee)
        for fn in functions[callee]:
            digest.update(ast.dump(fn).encode())
            todo.extend(sorted(_referenced_names([fn])))  # type: ignore[list-item]
    return str(digest.hexdigest())


@dataclass(frozen=True)
class EndCall:
    """The arguments of a block's ``SkipBlock.end(...)``: for each positional argument and
    each keyword, the variable it names (``None`` for any other expression)."""

    positional: tuple[str | None, ...]
    keywords: tuple[tuple[str, str | None], ...]

    @property
    def variables(self) -> frozenset[str]:
        """The names whose evaluation raises NameError when the block did not bind them."""
        return frozenset(
            n for n in (*self.positional, *(v for _, v in self.keywords)) if n is not None
        )


def _variable(expr: ast.expr) -> str | None:
    return expr.id if isinstance(expr, ast.Name) else None


def end_calls(source: str, filename: str = "<script>") -> dict[str, EndCall]:
    """Block name -> the ``SkipBlock.end(...)`` call right after its ``if`` statement."""
    out: dict[str, EndCall] = {}
    for node in ast.walk(parse(source, filename)):
        for body in (getattr(node, part, None) for part in ("body", "orelse", "finalbody")):
            if not isinstance(body, list):
                continue
            for stmt, after in zip(body, body[1:]):
                if isinstance(stmt, ast.If) and (name := block_name(stmt.test)) is not None:
                    value = getattr(after, "value", None)
                    if isinstance(value, ast.Call):
                        out[name] = EndCall(
                            tuple(_variable(a) for a in value.args),
                            tuple((k.arg, _variable(k.value)) for k in value.keywords if k.arg),
                        )
    return out


def end_names(source: str, filename: str = "<script>") -> dict[str, frozenset[str]]:
    """Block name -> the keyword names its ``SkipBlock.end(...)`` call carries."""
    return {
        name: frozenset(k for k, _ in call.keywords)
        for name, call in end_calls(source, filename).items()
    }


def compare(
    recorded: str,
    edited: str,
    filename: str = "<script>",
    recorded_project: Mapping[str, str] | None = None,
    edited_project: Mapping[str, str] | None = None,
    seen: Seen | None = None,
) -> BlockChanges:
    """Which blocks of ``recorded`` changed, vanished or appeared in ``edited``; with the
    project's other files (path -> source, as recorded and as edited), across them all.
    ``seen``: which callbacks each block ran when recorded (``project_fingerprints``)."""
    before = {**(recorded_project or {}), filename: recorded}
    after = {**(edited_project or {}), filename: edited}
    old = project_fingerprints(before, " (recorded)", seen)
    new = project_fingerprints(after, "", seen)
    return BlockChanges(
        changed=frozenset(n for n in old.keys() & new.keys() if old[n] != new[n]),
        missing=frozenset(old.keys() - new.keys()),
        added=frozenset(new.keys() - old.keys()),
        ends=_project_end_calls(after, ""),
        recorded_ends=_project_end_calls(before, " (recorded)"),
    )


def _project_end_calls(files: Mapping[str, str], label: str) -> dict[str, EndCall]:
    return {n: c for path, s in files.items() for n, c in end_calls(s, path + label).items()}
