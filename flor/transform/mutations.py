"""Which variables a region of code mutates the objects of: rule (a) of ``effects``.

A method call on an object (unless the method only reads: ``READ_ONLY_METHODS``), a store
into its attribute or item, and passing it to a call that may mutate its arguments (the
project's functions that do, in-place library calls such as ``clip_grad_norm_``, anything
unknown) mutate it; ``print`` and ``flor.log`` only read theirs.
"""

from __future__ import annotations

import builtins

import libcst as cst

from flor.transform.program import FunctionNode, Nodes, Program, dotted, node_of, root_name

_PURE_BUILTINS = frozenset(dir(builtins)) - {"next", "setattr", "delattr", "exec"}

# Methods that only read (tensor math, accessors, containers' getters): calling them
# on an object is not a reason to checkpoint it.
READ_ONLY_METHODS = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "sum",
        "mean",
        "norm",
        "std",
        "var",
        "max",
        "min",
        "argmax",
        "argmin",
        "abs",
        "detach",
        "cpu",
        "clone",
        "size",
        "dim",
        "numel",
        "float",
        "double",
        "long",
        "int",
        "half",
        "parameters",
        "named_parameters",
        "modules",
        "named_modules",
        "children",
        "buffers",
        "state_dict",
        "get_last_lr",
        "get_lr",
        "keys",
        "values",
        "items",
        "get",
        "copy",
        "format",
        "split",
        "join",
        "startswith",
        "endswith",
        "eq",
        "ne",
        "lt",
        "gt",
        "le",
        "ge",
        "isnan",
        "isinf",
        "all",
        "any",
        "view",
        "reshape",
        "flatten",
        "squeeze",
        "unsqueeze",
        "t",
        "transpose",
        "permute",
        "contiguous",
        "exp",
        "log",
        "sqrt",
        "pow",
        "softmax",
        "log_softmax",
        "sigmoid",
        "tanh",
        "relu",
        "round",
        "topk",
        "sort",
        "count",
        "index",
        "get_scale",
    }
)
_SINK_CALLS = frozenset(
    {"print", "log"}
)  # print(...), flor.log(...): their arguments are only read


def _in_sink_call(p: Program, node: cst.CSTNode) -> bool:
    for a in p.ancestors(node):
        if isinstance(a, cst.Call):
            func = a.func
            name = (
                func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            )
            if name in _SINK_CALLS:
                return True
        if isinstance(a, cst.BaseStatement):
            return False
    return False


def mutation_roots(p: Program, nodes: Nodes) -> list[cst.Name]:
    """The variables whose objects ``nodes`` mutate, once per place they do."""
    roots: list[cst.Name] = []
    for top in nodes:
        for node in p.walk(top):
            if isinstance(node, cst.Call):
                func = node.func
                if _in_sink_call(p, node):
                    continue
                if isinstance(func, cst.Attribute) and func.attr.value not in READ_ONLY_METHODS:
                    roots.append(root_name(func.value))  # type: ignore[arg-type]
                elif isinstance(func, cst.Name) and _binding(p, func)[0] == "value":
                    roots.append(func)  # a called module: its parameters are what trains
                roots.extend(_mutated_args(p, node))
            elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del)):
                targets = (
                    [t.target for t in node.targets]
                    if isinstance(node, cst.Assign)
                    else [node.target]
                )
                for t in targets:
                    for element in t.elements if isinstance(t, (cst.Tuple, cst.List)) else [t]:
                        value = element.value if isinstance(element, cst.BaseElement) else element
                        if isinstance(value, (cst.Attribute, cst.Subscript)):
                            roots.append(root_name(value))  # type: ignore[arg-type]
    return [r for r in roots if r is not None]


def _mutated_args(p: Program, call: cst.Call) -> list[cst.Name]:
    """The variables whose objects a call's arguments may let it mutate (``x``, ``self.x``).

    The project's functions (this file's, or another's): those bound to parameters the
    callee mutates. Builtins, numeric libraries (torch, numpy, math, ...) unless in-place
    (``clip_grad_norm_``), and called objects (``model(x)``, ``criterion(out, y)``): none.
    Anything else (a method of an unknown object, a library): all of them.
    """
    func = call.func
    roots = [_arg_root(a.value) for a in call.args]
    if not any(roots) or not _may_mutate_args(p, func):
        return []
    callees = [(p, fn) for fn in p.callees(call)] or p.external(p, call)
    if not callees:
        return [r for r in roots if r is not None]
    out = []
    for q, fn in callees:
        mutated = _mutated_params(q, fn)
        for arg, root in zip(call.args, roots):
            param = _parameter(q, fn, call, arg)
            if root is not None and (param is None or param in mutated):
                out.append(root)
    return out


def _parameter(p: Program, fn: FunctionNode, call: cst.Call, arg: cst.Arg) -> str | None:
    """The parameter of ``fn`` that ``arg`` of ``call`` binds; None where it is not one
    name (``*args``, ``**kwargs``, unpacking), which counts as mutated."""
    params = fn.params
    if arg.star:
        return None
    if arg.keyword is not None:
        named = {x.name.value for x in (*params.params, *params.kwonly_params)}
        return arg.keyword.value if arg.keyword.value in named else None
    positional = [x.name.value for x in (*params.posonly_params, *params.params)]
    if p.is_method(fn) and positional and not _is_static(fn):
        positional = positional[1:]  # self, or cls
    index = [a for a in call.args if a.keyword is None].index(arg)
    return positional[index] if index < len(positional) else None


def _is_static(fn: FunctionNode) -> bool:
    return any(dotted(d.decorator) == "staticmethod" for d in fn.decorators)


def _arg_root(value: cst.BaseExpression) -> cst.Name | None:
    """The variable an argument passes an object of: ``model``, or ``self`` for
    ``self.model`` (the callee may mutate what the attribute holds)."""
    if isinstance(value, cst.Name):
        return value
    return root_name(value) if isinstance(value, cst.Attribute) else None


_LIBRARIES = frozenset(
    {
        "torch",
        "numpy",
        "math",
        "random",
        "itertools",
        "functools",
        "os",
        "sys",
        "time",
        "json",
        "re",
        "collections",
        "statistics",
        "copy",
        "operator",
        "einops",
        "scipy",
        "sklearn",
    }
)


def _may_mutate_args(p: Program, func: cst.BaseExpression) -> bool:
    root = root_name(func)
    if root is None:
        return True
    kind, module = _binding(p, root)
    if kind == "builtin":
        return func is not root or root.value not in _PURE_BUILTINS
    if kind == "import" and module.split(".")[0] in _LIBRARIES:
        last = func.attr.value if isinstance(func, cst.Attribute) else root.value
        return last.endswith("_") and not last.endswith("__")
    # calling an object (model(x), criterion(out, y)) leaves its arguments alone
    return not (kind == "value" and func is root)


def _binding(p: Program, name: cst.Name) -> tuple[str, str]:
    """How ``name`` is bound where it is used: builtin, import (with module), def, or value."""
    scope = p.scope(name)
    assignments = scope[name.value] if scope is not None and name.value in scope else set()
    for a in assignments:
        kind = type(a).__name__
        if kind == "BuiltinAssignment":
            return "builtin", ""
        if kind == "ImportAssignment":
            node = node_of(a)
            if isinstance(node, cst.ImportFrom) and node.module is not None:
                return "import", p.code(node.module)
            for alias in getattr(node, "names", ()):
                bound = (
                    alias.asname.name.value if alias.asname else p.code(alias.name).split(".")[0]
                )
                if bound == name.value:
                    return "import", p.code(alias.name)
            return "import", ""
        if isinstance(node_of(a), (cst.FunctionDef, cst.ClassDef)):
            return "def", ""
    return ("value", "") if assignments else ("unknown", "")


def _mutated_params(p: Program, fn: FunctionNode) -> set[str]:
    key = ("mutated-params", id(fn))
    if key not in p.memo:
        p.memo[key] = set()  # recursion guard
        p.memo[key] = {r.value for r in mutation_roots(p, [fn.body])}
    found = p.memo[key]
    assert isinstance(found, set)
    return found
