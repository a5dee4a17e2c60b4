"""The instrumenter's driver: source in, ``Instrumented`` out. Never raises for a user's file."""

from __future__ import annotations

import ast
import re

import libcst as cst

from flor.transform.effects import StateItem, feeds_block, infer_state
from flor.transform.loops import (
    BlockChoice,
    Refused,
    choose_block,
    file_opted_out,
    main_loops,
    opted_out,
    refuse_multiprocessing,
)
from flor.transform.program import Program
from flor.transform.report import BlockDecision, Instrumented, LoopDecision, Note
from flor.transform.rewrite import LOOP_VARIABLE, FlorRewriter, LoopRewrite

_ALREADY = re.compile(r"^[^#\n]*\bflor\.(it|SkipBlock\.step_into)\(", re.MULTILINE)
_IMPORTS_FLOR = re.compile(r"^\s*import flor\s*$", re.MULTILINE)


def instrument(source: str, filename: str = "<script>") -> Instrumented:
    """Rewrite ``source`` so that its main loops record and replay with flor."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        return Instrumented(filename, source, source, error=_syntax_error(source, e))
    left = _left_unchanged(source)
    if left is not None:
        return Instrumented(filename, source, source, notes=(left,))
    p = Program(module)
    refusal = refuse_multiprocessing(p)
    if refusal is not None:
        return Instrumented(filename, source, source, notes=(refusal,))
    notes: list[Note] = []
    rewrites: dict[int, LoopRewrite] = {}
    decisions: list[LoopDecision] = []
    per_function: dict[str, int] = {}
    for loop, owner in main_loops(p):
        decided = _decide(p, loop, notes)
        if decided is None:
            continue
        choice, block, state = decided
        qualname = p.qualname(owner)
        index = per_function.get(qualname, 0)
        per_function[qualname] = index + 1
        name = f"{qualname.replace('<module>', 'module')}.L{index}"
        rewrites[id(loop)] = LoopRewrite(name, choice, state)
        lines = (p.line(block[0]), p.last_line(block[-1]))
        names = tuple(item.name for item in state)
        blocks = (BlockDecision(name, *lines, choice.why, names),)
        decisions.append(LoopDecision(qualname, p.line(loop), _header(p, loop), blocks))
    if not rewrites:
        return Instrumented(filename, source, source, tuple(decisions), tuple(notes))
    variable = LOOP_VARIABLE if LOOP_VARIABLE not in source else LOOP_VARIABLE + "_"
    add_import = not _IMPORTS_FLOR.search(source)
    new = module.visit(FlorRewriter(rewrites, variable, add_import))
    return Instrumented(filename, source, new.code, tuple(decisions), tuple(notes))


def _left_unchanged(source: str) -> Note | None:
    """Why a file is not to be rewritten at all, if it is not."""
    if file_opted_out(source):
        return Note(1, "`# flor: skip-file`: left unchanged")
    if _IMPORTS_FLOR.search(source) and _ALREADY.search(source):
        return Note(1, "already instrumented: left unchanged")
    return None


def _decide(
    p: Program, loop: cst.For | cst.While, notes: list[Note]
) -> tuple[BlockChoice, list[cst.BaseStatement], tuple[StateItem, ...]] | None:
    """The block of a main loop and its state; None (and a note saying why) if none."""
    header = _header(p, loop)
    if opted_out(p, loop):
        notes.append(Note(p.line(loop), f"`{header}`: `# flor: skip`, left unchanged"))
        return None
    try:
        if isinstance(loop, cst.While) and any(
            isinstance(n, cst.NamedExpr) for n in p.walk(loop.test)
        ):
            raise Refused("the while condition assigns with `:=`")
        choice = choose_block(p, loop, feeds_block)
        assert isinstance(loop.body, cst.IndentedBlock)  # choose_block refuses others
        block = list(loop.body.body)[choice.start : choice.stop]
        return choice, block, tuple(infer_state(p, loop, block))
    except Refused as e:
        notes.append(Note(p.line(loop), f"`{header}` not instrumented: {e}"))
        return None


def _syntax_error(source: str, e: cst.ParserSyntaxError) -> str:
    """Python's own message where it has one (clearer), else libcst's; with line:column."""
    try:
        ast.parse(source)
    except SyntaxError as py:
        return f"{py.lineno}:{py.offset}: cannot parse: {py.msg}"
    return f"{e.editor_line}:{e.editor_column}: cannot parse: {e.message}"


def _header(p: Program, loop: cst.For | cst.While) -> str:
    if isinstance(loop, cst.For):
        return f"for {p.code(loop.target)} in {p.code(loop.iter)}"
    return f"while {p.code(loop.test)}"
