"""What a block changes that outlives it: the state its ``SkipBlock.end`` must carry.

The rule: (a) every object the block (or a same-file function it
calls) mutates through a method call, an attribute or subscript store, or by
passing it to a call, when the object outlives the block; plus (b) every name
the block rebinds that is live after it (read later in the iteration, after the
loop, or carried into the next iteration); plus (c) the RNG streams, which the
runtime always saves. Module globals that called functions mutate or rebind
(``global best_acc``) count too, and are restored at module scope. Sinks and
read-only inputs may be listed: the runtime neither saves nor touches them.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import FunctionScope, GlobalScope, Scope

from flor.transform.loops import Loop, Refused
from flor.transform.mutations import mutation_roots
from flor.transform.program import FunctionNode, Nodes, Program, node_of

UNBOUND = "flor.UNBOUND"


@dataclass(frozen=True)
class StateItem:
    name: str
    expr: str  # what end() receives
    target: str  # what end()'s result is bound to


def infer_state(p: Program, loop: Loop, block: Nodes) -> list[StateItem]:
    """State of ``block``, plus what the rest of the loop body carries across iterations.

    The latter (a ``best_acc`` updated by evaluation, a history list) is saved at
    the block's end too, so that a segment starting after it restores the value a
    full run had; the outer body then updates it as in a full run (``replay.plan``: entries).
    """
    scope = p.statement_scope(block[0])
    assert isinstance(loop.body, cst.IndentedBlock)
    body = list(loop.body.body)
    outer = [s for s in body if all(s is not b for b in block)]
    loop_targets = (
        {n.value for n in p.walk(loop.target) if isinstance(n, cst.Name)}
        if isinstance(loop, cst.For)
        else set()
    )
    names: list[str] = []
    candidates = (
        _trainable_reads(p, block)
        + _mutated(p, block, block)
        + _rebound_live(p, scope, block)
        + _mutated(p, outer, [loop])
        + _carried(p, scope, loop, outer)
    )
    for name in candidates:
        if name not in names and name not in loop_targets:
            names.append(name)
    global_names = _callee_globals(p, block)
    global_names += [g for g in _callee_globals(p, outer) if g not in global_names]
    items = [item for n in names if (item := _item(p, scope, loop, n)) is not None]
    for n in global_names:
        if n not in names:
            items.append(_global_item(p, scope, n, loop))
    for module, n in _foreign_globals(p, [*block, *outer]):
        if module != p.name:
            items.append(_foreign_item(module, n))
    _refuse_iterators(p, scope, [i.name for i in items])
    return items


def feeds_block(p: Program, stmt: cst.BaseStatement, block: Nodes) -> bool:
    """Whether ``stmt`` fills a container the block's update reads (``policy.rewards``, a
    replay buffer): it mutates, directly or through a same-file call, an object that the
    block or the functions it calls refer to."""
    mutated = {r.value for r in mutation_roots(p, [stmt])}
    for fn in p.reachable_functions(stmt):
        mutated |= {r.value for r in mutation_roots(p, [fn.body]) if _is_global_use(p, r)}
    if not mutated:
        return False
    regions = [*block, *(fn.body for s in block for fn in p.reachable_functions(s))]
    read = {n.value for region in regions for n in p.walk(region) if isinstance(n, cst.Name)}
    return bool(mutated & read)


def _is_global_use(p: Program, name: cst.Name) -> bool:
    scope = p.scope(name)
    return isinstance(scope, FunctionScope) and name.value not in scope.assignments


# -- (a) mutated objects ---------------------------------------------------------------
def _mutated(p: Program, region: Nodes, owner: Nodes) -> list[str]:
    """Names whose objects ``region`` mutates and that are bound outside ``owner``."""
    out = []
    for name in mutation_roots(p, list(region)):
        if name.value not in out and _outlives(p, name, owner):
            out.append(name.value)
    return out


def _trainable_reads(p: Program, block: Nodes) -> list[str]:
    """Names the block reads that are bound to trainable tensors (``nn.Parameter(...)``,
    ``requires_grad=True``): an optimizer updates them in place without naming them."""
    out = []
    for node in (n for s in block for n in p.walk(s)):
        if not isinstance(node, cst.Name) or node.value in out:
            continue
        scope = p.scope(node)
        for a in scope[node.value] if scope is not None and node.value in scope else ():
            if type(a).__name__ != "Assignment" or any(p.inside(node_of(a), s) for s in block):
                continue
            statement = next(
                (x for x in p.ancestors(node_of(a)) if isinstance(x, cst.SimpleStatementLine)), None
            )
            code = p.code(statement) if statement is not None else ""
            if "Parameter(" in code or "requires_grad=True" in code or "requires_grad_(" in code:
                out.append(node.value)
                break
    return out


def _carried(p: Program, scope: Scope, loop: Loop, outer: Nodes) -> list[str]:
    """Names the loop body rebinds outside the block that a later iteration or the code after
    the loop reads: initialized before the loop and read in it, or read outside it (a
    ``best_state`` kept when validation improves and loaded after the loop). A segment that
    starts mid-run, or a sparse replay that skips iterations, must find the value a full
    run had."""
    out = []
    for a in scope.assignments:
        if not any(p.inside(node_of(a), s) for s in outer) or a.name in out:
            continue
        if isinstance(node_of(a), (cst.Import, cst.ImportFrom, cst.FunctionDef, cst.ClassDef)):
            continue
        others = scope.assignments[a.name]
        references = [r.node for o in others for r in o.references]
        initialized = any(not p.inside(node_of(o), loop) for o in others)
        read_in_loop = any(p.inside(r, loop) for r in references)
        read_outside = any(not p.inside(r, loop) for r in references)
        augmented = isinstance(p.parent(node_of(a)), cst.AugAssign)
        if (initialized and (read_in_loop or augmented)) or read_outside:
            out.append(a.name)
    return out


def _outlives(p: Program, name: cst.Name, region: Nodes) -> bool:
    """Whether ``name`` refers to an object bound outside ``region`` (not a temporary)."""
    scope = p.scope(name)
    assignments = scope[name.value] if scope is not None and name.value in scope else set()
    if not assignments:
        return False
    for a in assignments:
        if type(a).__name__ in ("BuiltinAssignment", "ImportAssignment"):
            return False
        if isinstance(node_of(a), (cst.FunctionDef, cst.ClassDef)):
            return False
    return any(not any(p.inside(node_of(a), s) for s in region) for a in assignments)


# -- (b) rebound, live names -------------------------------------------------------------
def _rebound_live(p: Program, scope: Scope, block: Nodes) -> list[str]:
    out: list[str] = []
    scopes = [scope] + ([scope.globals] if not isinstance(scope, GlobalScope) else [])
    for sc in scopes:
        for assignment in sc.assignments:
            node = node_of(assignment)
            if not any(p.inside(node, s) for s in block) or p.scope(node) is not scope:
                continue
            if isinstance(node, (cst.Import, cst.ImportFrom, cst.FunctionDef, cst.ClassDef)):
                continue
            name = assignment.name
            if name not in out and _live(p, sc, name, block):
                out.append(name)
    return out


def _live(p: Program, scope: Scope, name: str, block: Nodes) -> bool:
    assignments = scope.assignments[name]
    inside = [a for a in assignments if any(p.inside(node_of(a), s) for s in block)]
    for a in assignments:
        for ref in a.references:
            if not any(p.inside(ref.node, s) for s in block):
                return True  # read after the block, before it, or after the loop
    if len(inside) < len(assignments):
        return any(a.references for a in assignments)  # also bound outside: carried across
    first_write = min((node_of(a) for a in inside), key=lambda n: p.index.position[id(n)])
    for node in (n for s in block for n in p.walk(s)):
        if (
            isinstance(node, cst.AugAssign)
            and isinstance(node.target, cst.Name)
            and node.target.value == name
        ):
            return True  # reads the previous value
        if isinstance(node, cst.Name) and node.value == name and p.before(node, first_write):
            return True  # read before it is written: the previous iteration's value
    return False


# -- callees: module globals -------------------------------------------------------------
def _callee_globals(p: Program, block: Nodes) -> list[str]:
    """Module globals that functions called by the block rebind (``global``) or mutate."""
    return _globals_changed(p, [f for s in block for f in p.reachable_functions(s)])


def _foreign_globals(p: Program, region: Nodes) -> list[tuple[str, str]]:
    """(module, name) of the globals of the project's other modules that functions there,
    called from ``region`` directly or through calls, rebind or mutate."""
    out: list[tuple[str, str]] = []
    seen: set[int] = set()

    def outgoing(q: Program, nodes: list[cst.CSTNode]) -> list[tuple[Program, cst.Call]]:
        regions = [*nodes, *(f.body for n in nodes for f in q.reachable_functions(n))]
        return [(q, c) for r in regions for c in q.calls(r) if not q.callees(c)]

    todo = outgoing(p, list(region))
    while todo:
        caller, call = todo.pop()
        for q, fn in caller.external(caller, call):
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            reached = [fn, *q.reachable_functions(fn.body)]
            out.extend((q.name, g) for g in _globals_changed(q, reached) if (q.name, g) not in out)
            todo.extend(outgoing(q, [fn.body]))
    return out


def _globals_changed(p: Program, functions: list[FunctionNode]) -> list[str]:
    out: list[str] = []
    for fn in functions:
        for node in p.walk(fn.body):
            if isinstance(node, cst.Global):
                out.extend(n.name.value for n in node.names if n.name.value not in out)
        for root in mutation_roots(p, [fn.body]):
            sc = p.scope(root)
            if (
                isinstance(sc, FunctionScope)
                and root.value not in sc.assignments
                and root.value not in out
            ):
                g = sc.globals
                if root.value in g.assignments and _is_plain_global(g, root.value):
                    out.append(root.value)
    return out


def _is_plain_global(g: Scope, name: str) -> bool:
    return all(
        not isinstance(node_of(a), (cst.Import, cst.ImportFrom, cst.FunctionDef, cst.ClassDef))
        and type(a).__name__ == "Assignment"
        for a in g.assignments[name]
    )


# -- expressions and targets --------------------------------------------------------------
def _item(p: Program, scope: Scope, loop: Loop, name: str) -> StateItem | None:
    if isinstance(scope, GlobalScope):
        return _global_item(p, scope, name, loop)
    declared_global = name in _declared_globals(p, scope)
    if declared_global:
        return StateItem(name, f'globals().get("{name}", {UNBOUND})', name)
    if name in scope.assignments:
        expr = name if _bound_before(p, scope, loop, name) else f'locals().get("{name}", {UNBOUND})'
        return StateItem(name, expr, name)
    if name in scope.globals.assignments:
        return _global_item(p, scope, name, loop)
    return None  # a free variable of an enclosing function: not restorable here


def _global_item(p: Program, scope: Scope, name: str, loop: Loop) -> StateItem:
    if isinstance(scope, GlobalScope):
        bound = _bound_before(p, scope, loop, name)
        return StateItem(name, name if bound else f'globals().get("{name}", {UNBOUND})', name)
    target = name if name in _declared_globals(p, scope) else f'globals()["{name}"]'
    return StateItem(name, f'globals().get("{name}", {UNBOUND})', target)


def _foreign_item(module: str, name: str) -> StateItem:
    """A global of another project module, through ``flor.globals_of``: the block's file may
    not even have the module's name bound."""
    where = f'flor.globals_of("{module}")'
    return StateItem(
        f"{module.replace('.', '_')}_{name}",
        f'{where}.get("{name}", {UNBOUND})',
        f'{where}["{name}"]',
    )


def _declared_globals(p: Program, scope: Scope) -> set[str]:
    node = getattr(scope, "node", None)
    if node is None:
        return set()
    return {n.name.value for g in p.walk(node) if isinstance(g, cst.Global) for n in g.names}


def _bound_before(p: Program, scope: Scope, loop: Loop, name: str) -> bool:
    """Whether ``name`` is surely bound when the loop starts (so no UNBOUND guard is needed)."""
    loop_ancestors = {id(a) for a in p.ancestors(loop)}
    for a in scope.assignments[name]:
        if isinstance(node_of(a), cst.Param):
            return True
        if not p.before(node_of(a), loop):
            continue
        compound = next(
            (
                x
                for x in p.ancestors(node_of(a))
                if isinstance(x, (cst.For, cst.While, cst.If, cst.Try, cst.With, cst.FunctionDef))
            ),
            None,
        )
        if compound is None or id(compound) in loop_ancestors:
            return True
    return False


def _refuse_iterators(p: Program, scope: Scope, names: list[str]) -> None:
    """Generators cannot be checkpointed (their frame is not state flor can save). ``iter(...)`` is left to the
    runtime: a DataLoader's or a list's iterator can be, and one that cannot (``iter`` of a
    generator) makes the recording say which value, and replay re-execute the block."""
    generators = {name for name, fns in p.functions.items() if any(_yields(p, f) for f in fns)}
    for name in names:
        for a in scope[name]:
            if type(a).__name__ != "Assignment":
                continue
            parent = p.parent(node_of(a))
            while parent is not None and not isinstance(
                parent, (cst.Assign, cst.AnnAssign, cst.BaseStatement)
            ):
                parent = p.parent(parent)
            value = getattr(parent, "value", None)
            if isinstance(value, cst.GeneratorExp) or (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Name)
                and (value.func.value == "cycle" or value.func.value in generators)
            ):
                raise Refused(
                    f"`{name}` (line {p.line(node_of(a))}) is an iterator or generator the block advances; "
                    "its position cannot be checkpointed"
                )


def _yields(p: Program, fn: FunctionNode) -> bool:
    return any(isinstance(n, cst.Yield) for n in p.walk(fn.body))
