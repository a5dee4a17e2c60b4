"""Where the work is: the main loop(s) of a script and the block in each.

The main loop is the outermost loop that does training work (a backward pass or
an optimizer step, directly or through same-file calls), found by following
calls from the module's top level and its ``__main__`` block (a ``main()``, a
``train()`` function, a method; ``tests/scripts/plain`` has each). Its block is the top-level statements of the loop body that do the
work: an inline batch loop, the call that runs it, or, in step loops, the
update region, extended backwards over statements whose results only the block
reads (the forward pass feeding ``backward``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from flor.transform.fingerprints import normalized
from flor.transform.program import FunctionNode, Nodes, Program, dotted, node_of, spawned
from flor.transform.report import Note

Loop = cst.For | cst.While
OPT_OUT = "flor: skip"


@dataclass
class BlockChoice:
    start: int  # slice of the loop body's statements
    stop: int
    why: str


class Refused(Exception):
    """This loop or block is not provably safe to instrument; the reason is the message."""


def main_loops(p: Program) -> list[tuple[Program, Loop, FunctionNode | None]]:
    """Training loops reached from the entry point that are not inside another one, with
    the file (``Program``) each is in: calls are followed into the project's other files."""
    found: list[tuple[Program, Loop, FunctionNode | None]] = []
    visited: set[int] = set()

    def visit(q: Program, node: cst.CSTNode, owner: FunctionNode | None) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        if isinstance(node, (cst.For, cst.While)) and q.does_training(node):
            if all(loop is not node for _, loop, _ in found):
                found.append((q, node, owner))
            return
        if isinstance(node, cst.Call):
            callees = [(q, fn) for fn in q.callees(node)] or q.external(q, node)
            for where, fn in callees:
                if id(fn) not in visited:
                    visited.add(id(fn))
                    visit(where, fn.body, fn)
        for child in node.children:
            visit(q, child, owner)

    visit(p, p.module, None)
    return found


def opted_out(p: Program, node: cst.CSTNode) -> bool:
    """A ``# flor: skip`` comment on the statement's line or the line above it."""
    comments = [line.comment.value for line in getattr(node, "leading_lines", ()) if line.comment]
    body = getattr(node, "body", None)
    header = getattr(body, "header", None)
    if header is not None and header.comment is not None:
        comments.append(header.comment.value)
    return any(OPT_OUT in c for c in comments)


def file_opted_out(source: str) -> bool:
    """A ``# flor: skip-file`` comment in the first 30 lines."""
    head = source.splitlines()[:30]
    return any(line.lstrip().startswith("#") and "flor: skip-file" in line for line in head)


# Whether a statement before the block fills what the block consumes (a rollout's lists).
Feeds = Callable[[Program, cst.BaseStatement, Nodes], bool]


def choose_block(
    p: Program, loop: Loop, feeds: Feeds | None = None, openings: frozenset[str] = frozenset()
) -> BlockChoice:
    """``openings``: where the record's blocks began (``fingerprints.block_openings``), for a
    replay's instrumenting: its blocks begin there too."""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock):
        raise Refused("a loop body on the same line as its header")
    stmts = list(body.body)
    working = [i for i, s in enumerate(stmts) if p.does_training(s)]
    if not working:
        raise Refused("the training work is not in statements of the loop body")
    start, stop = working[0], working[-1] + 1
    while start > 0 and _feeds_only(p, stmts[start - 1], stmts, start, stop, loop):
        start -= 1
    start = _recorded_start(p, stmts, start, openings)
    rollout = _rollout(p, stmts, start, stop, feeds)
    if rollout is not None:
        start = rollout
    _check_escapes(p, stmts[start:stop], loop)
    why = "the rollout and the update" if rollout is not None else _why(p, stmts[start:stop])
    return BlockChoice(start, stop, why)


def _rollout(p: Program, stmts: Nodes, start: int, stop: int, feeds: Feeds | None) -> int | None:
    """The first statement of a rollout loop before the block that fills what the block's
    update consumes (REINFORCE, PPO): the block starts there, so that replay skips the
    rollout too, and a restore never lands between a graph's forward and its backward."""
    if feeds is None:
        return None
    for i in range(start - 1, -1, -1):
        stmt = stmts[i]
        if isinstance(stmt, (cst.For, cst.While)) and feeds(p, stmt, stmts[start:stop]):
            return i
    return None


def _why(p: Program, block: Nodes) -> str:
    if len(block) == 1 and isinstance(block[0], (cst.For, cst.While)):
        return "the inline training loop"
    if len(block) == 1 and isinstance(block[0], cst.SimpleStatementLine):
        calls = [c for c in p.calls(block[0]) if p.callees(c) or p.external(p, c)]
        if calls:
            return f"the call to {p.code(calls[0].func)}(), which trains"
    return "the update region of the iteration"


def _recorded_start(p: Program, stmts: Nodes, start: int, openings: frozenset[str]) -> int:
    """``start``, or the earlier statement the record's block began at, if only assignments
    lie between. A hindsight line that reads the forward's ``loss`` after the block would
    otherwise move the forward out of it: the block would differ from the record's, and
    every iteration would re-execute it instead of restoring its checkpoint."""
    if not openings:
        return start
    for j in range(start - 1, -1, -1):
        if not _assignment(p, stmts[j]):
            break
        if normalized(p.code(stmts[j])) in openings:
            return j
    return start


def _assignment(p: Program, stmt: cst.CSTNode) -> bool:
    """A line of assignments only, printing nothing."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    if not all(isinstance(s, (cst.Assign, cst.AnnAssign)) for s in stmt.body):
        return False
    return not any(isinstance(c.func, cst.Name) and c.func.value == "print" for c in p.calls(stmt))


def _feeds_only(
    p: Program, stmt: cst.BaseStatement, stmts: Nodes, start: int, stop: int, loop: Loop
) -> bool:
    """Whether ``stmt`` only binds names that the block (stmts[start:stop]) alone reads."""
    if not _assignment(p, stmt):
        return False
    assert isinstance(stmt, cst.SimpleStatementLine)
    block = stmts[start:stop]
    targets = [n for n in p.walk(stmt) if isinstance(n, cst.Name) and _is_target(p, n, stmt)]
    if not targets:
        return False
    scope = p.statement_scope(stmt)
    for name in targets:
        for assignment in scope.assignments[name.value]:
            if node_of(assignment) is not name:
                continue
            for ref in assignment.references:
                if not any(p.inside(ref.node, s) for s in block):
                    return False
    return True


def _is_target(p: Program, name: cst.Name, stmt: cst.SimpleStatementLine) -> bool:
    for small in stmt.body:
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, cst.AnnAssign):
            targets = [small.target]
        else:
            continue
        for target in targets:
            if target is name or (
                isinstance(target, (cst.Tuple, cst.List))
                and any(e.value is name for e in target.elements)
            ):
                return True
    return False


def _check_escapes(p: Program, block: Nodes, loop: Loop) -> None:
    for stmt in block:
        for node in p.walk(stmt):
            if isinstance(node, (cst.Return, cst.Yield)) and _same_function(p, node, stmt):
                raise Refused(
                    f"line {p.line(node)}: `{p.code(node).strip()}` leaves the block early"
                )
            if isinstance(node, (cst.Break, cst.Continue)) and _target_loop(p, node) is loop:
                raise Refused(
                    f"line {p.line(node)}: `{p.code(node).strip()}` leaves the block early"
                )


def _same_function(p: Program, node: cst.CSTNode, stmt: cst.CSTNode) -> bool:
    """Whether ``node`` belongs to ``stmt``'s own code, not to a function defined in it."""
    for a in p.ancestors(node):
        if isinstance(a, (cst.FunctionDef, cst.Lambda)):
            return False
        if a is stmt:
            return True
    return True


def _target_loop(p: Program, node: cst.CSTNode) -> cst.CSTNode | None:
    for a in p.ancestors(node):
        if isinstance(a, (cst.For, cst.While)):
            return a
        if isinstance(a, (cst.FunctionDef, cst.Lambda)):
            return None
    return None


def refuse_multiprocessing(p: Program, outcome: str = "the file is left unchanged") -> Note | None:
    """Hogwild/A3C-style shared models cannot be replayed faithfully. ``mp.spawn`` of a
    function of the file can: its processes are the ranks of a job. ``outcome``: what the
    note says flor does instead."""
    for call in (n for n in p.walk(p.module) if isinstance(n, cst.Call)):
        target = spawned(call)
        if target in p.functions:
            continue
        name = dotted(call.func)
        if target is not None:
            return Note(
                p.line(call),
                f"`{name}({target}, ...)`: {target} is not defined in this file, and flor "
                f"records the ranks `mp.spawn` starts only when it is; {outcome}",
            )
        if name.endswith(
            ("share_memory", ".spawn", "mp.Process", "multiprocessing.Process")
        ) or name in (
            "Process",
            "spawn",
        ):
            return Note(
                p.line(call),
                f"`{name}(...)`: multiprocessing training cannot be replayed faithfully; {outcome}",
            )
    return None
