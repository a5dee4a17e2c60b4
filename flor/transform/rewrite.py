"""The one libcst transformer: ``flor.it`` on main loops, SkipBlocks around their blocks.

Everything else of the user's file (formatting, comments) is kept as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from flor.transform.effects import StateItem
from flor.transform.loops import BlockChoice

LOOP_VARIABLE = "_flor_step"  # the reserved prefix for names flor injects


@dataclass(frozen=True)
class LoopRewrite:
    block_name: str
    choice: BlockChoice
    state: tuple[StateItem, ...]


class FlorRewriter(cst.CSTTransformer):
    def __init__(self, loops: dict[int, LoopRewrite], loop_variable: str, add_import: bool) -> None:
        super().__init__()
        self.loops = loops
        self.loop_variable = loop_variable
        self.add_import = add_import

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.BaseStatement:
        plan = self.loops.get(id(original))
        if plan is None:
            return updated
        return updated.with_changes(
            iter=_call("flor.it", updated.iter), body=self._body(updated.body, plan)
        )

    def leave_While(self, original: cst.While, updated: cst.While) -> cst.BaseStatement:
        plan = self.loops.get(id(original))
        if plan is None:
            return updated
        condition = cst.Lambda(params=cst.Parameters(), body=updated.test)
        return cst.For(
            target=cst.Name(self.loop_variable),
            iter=_call("flor.it", condition),
            body=self._body(updated.body, plan),
            orelse=updated.orelse,
            leading_lines=updated.leading_lines,
        )

    def _body(self, body: cst.BaseSuite, plan: LoopRewrite) -> cst.BaseSuite:
        assert isinstance(body, cst.IndentedBlock)
        stmts = list(body.body)
        start, stop = plan.choice.start, plan.choice.stop
        first = stmts[start]
        assert isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        inner = [first.with_changes(leading_lines=()), *stmts[start + 1 : stop]]
        block = cst.If(
            test=cst.parse_expression(f'flor.SkipBlock.step_into("{plan.block_name}")'),
            body=cst.IndentedBlock(body=inner),
            leading_lines=first.leading_lines,
        )
        return body.with_changes(
            body=[*stmts[:start], block, _end_statement(plan.state), *stmts[stop:]]
        )

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        return add_flor_import(updated) if self.add_import else updated


def add_flor_import(module: cst.Module) -> cst.Module:
    """``module`` with ``import flor`` after its docstring and ``__future__`` imports."""
    body = list(module.body)
    at = 0
    if body and _is_docstring(body[0]):
        at = 1
    while at < len(body) and _is_future_import(body[at]):
        at += 1
    return module.with_changes(body=[*body[:at], cst.parse_statement("import flor\n"), *body[at:]])


def _call(dotted: str, arg: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.parse_expression(dotted), args=[cst.Arg(arg)])


def _end_statement(state: tuple[StateItem, ...]) -> cst.BaseStatement:
    call = f"flor.SkipBlock.end({', '.join(f'{item.name}={item.expr}' for item in state)})"
    if not state:
        return cst.parse_statement(call + "\n")
    return cst.parse_statement(f"{', '.join(item.target for item in state)} = {call}\n")


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future_import(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.ImportFrom)
        and isinstance(stmt.body[0].module, cst.Name)
        and stmt.body[0].module.value == "__future__"
    )
