"""The instrumenter's driver: source in, ``Instrumented`` out. Never raises for a user's file."""

from __future__ import annotations

import ast
import re
from dataclasses import replace

import libcst as cst

from flor.sources import ENTRY, SourceFile, python_ast
from flor.transform import trainers
from flor.transform.callbacks import decorate
from flor.transform.effects import StateItem, feeds_block, infer_state
from flor.transform.fingerprints import handed_functions
from flor.transform.loops import (
    BlockChoice,
    Loop,
    Refused,
    choose_block,
    file_opted_out,
    main_loops,
    opted_out,
    refuse_multiprocessing,
)
from flor.transform.program import FunctionNode, Program, spawned
from flor.transform.project import Project, Resolve
from flor.transform.report import (
    BlockDecision,
    Instrumented,
    LoopDecision,
    Note,
    ProjectInstrumented,
)
from flor.transform.rewrite import LOOP_VARIABLE, FlorRewriter, LoopRewrite

_ALREADY = re.compile(r"^[^#\n]*\bflor\.(it|SkipBlock\.step_into)\(", re.MULTILINE)
_IMPORTS_FLOR = re.compile(r"^\s*import flor\s*$", re.MULTILINE)


def instrument(source: str, filename: str = "<script>") -> Instrumented:
    """Rewrite ``source`` so that its main loops record and replay with flor."""
    return instrument_project(SourceFile(ENTRY, filename, source), _no_project).entry


def instrument_project(
    entry: SourceFile, resolve: Resolve, openings: frozenset[str] = frozenset()
) -> ProjectInstrumented:
    """Rewrite the entry script and the project files its main loops live in; ``openings``:
    where a recording's blocks began (``loops.choose_block``), for instrumenting its replay."""
    source, filename = entry.source, entry.path
    project = Project(entry, resolve)
    try:
        p = project.parse(ENTRY)
    except cst.ParserSyntaxError as e:
        return ProjectInstrumented(
            Instrumented(filename, source, source, error=_syntax_error(source, e))
        )
    assert p is not None  # the entry is always the project's
    left = _left_unchanged(source)
    if left is not None:
        return ProjectInstrumented(Instrumented(filename, source, source, notes=(left,)))
    files = tuple(project.closure()[1:])
    refusal = refuse_multiprocessing(p)
    if refusal is not None:
        return ProjectInstrumented(
            Instrumented(filename, source, source, notes=(refusal,)), files=files
        )
    by_file: dict[int, list[tuple[Loop, FunctionNode | None]]] = {}
    programs = {id(p): p}
    found = main_loops(p)
    if not found:  # training started from another file in processes flor cannot follow?
        why = _refused_elsewhere(project, files, filename)
        if why is not None:
            return ProjectInstrumented(Instrumented(filename, source, source), (why,), files)
    for q, loop, owner in found:
        programs[id(q)] = q
        by_file.setdefault(id(q), []).append((loop, owner))
    results = {}
    for key, loops in by_file.items():
        q = programs[key]
        f = project.file(q.name)
        assert f is not None
        prefix = "" if f.module == ENTRY else f.module + "."
        results[key] = _instrument_file(q, f, loops, prefix, openings)
    main = results.pop(id(p), None) or Instrumented(filename, source, source)
    if not found:  # a library's loop (Lightning's Trainer.fit), which flor drives as it runs
        trees = [python_ast(f.source) for f in (entry, *files)]
        said = tuple(f"{t.title}: {t.shape}" for t in trainers.used(trees))
        main = replace(main, trainers=said)
    others = {r.filename: r for r in results.values()}
    main, others = _note_callbacks(entry, files, main, others)
    targets = {t for c in p.walk(p.module) if isinstance(c, cst.Call) and (t := spawned(c))}
    if any(q is p and owner is not None and p.qualname(owner) in targets for q, _, owner in found):
        main = replace(main, spawned=True)
    return ProjectInstrumented(main, tuple(others.values()), files)


def _note_callbacks(
    entry: SourceFile,
    files: tuple[SourceFile, ...],
    main: Instrumented,
    others: dict[str, Instrumented],
) -> tuple[Instrumented, dict[str, Instrumented]]:
    """Each file that defines a function the project hands to its own code, with
    ``@flor.callback`` on it (``callbacks``); files opted out are left as they are."""
    sources = {f.path: f.source for f in (entry, *files)}
    handed = handed_functions(sources)
    if not handed:
        return main, others
    out = dict(others)
    for f in (entry, *files):
        lines = _definitions(f.source)
        if not handed.keys() & lines.keys():  # none defined here: nothing to parse again
            continue
        done = main if f is entry else out.get(f.path, Instrumented(f.path, f.source, f.source))
        if _left_unchanged(f.source) is not None or done.error:
            continue
        rewritten, noted = decorate(
            cst.parse_module(done.source),
            frozenset(handed),
            bool(_IMPORTS_FLOR.search(done.source)),
        )
        if not noted:
            continue
        said = tuple((lines.get(name, 1), name, handed[name]) for name in noted)
        done = replace(done, source=rewritten.code, callbacks=said)
        if f is entry:
            main = done
        else:
            out[f.path] = done
    return main, out


def _definitions(source: str) -> dict[str, int]:
    """Function name -> the line of its first definition in ``source``."""
    found: dict[str, int] = {}
    for node in ast.walk(python_ast(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, node.lineno)
    return found


def _refused_elsewhere(
    project: Project, files: tuple[SourceFile, ...], entry: str
) -> Instrumented | None:
    """The first project file the entry imports that starts processes (``mp.Process``,
    ``share_memory``, ``mp.spawn`` of another file's function), with the note why."""
    for f in files:
        q = project.program(f.module)
        note = None if q is None else refuse_multiprocessing(q, f"{entry} runs without checkpoints")
        if note is not None:
            return Instrumented(f.path, f.source, f.source, notes=(note,))
    return None


def _no_project(module: str) -> SourceFile | None:
    return None


def _instrument_file(
    p: Program,
    f: SourceFile,
    loops: list[tuple[Loop, FunctionNode | None]],
    prefix: str,
    openings: frozenset[str] = frozenset(),
) -> Instrumented:
    """``f`` with its main ``loops`` rewritten; its block names start with ``prefix``."""
    source, filename = f.source, f.path
    if f.module != ENTRY:
        left = _left_unchanged(source) or refuse_multiprocessing(p)
        if left is not None:
            return Instrumented(filename, source, source, notes=(left,))
    notes: list[Note] = []
    rewrites: dict[int, LoopRewrite] = {}
    decisions: list[LoopDecision] = []
    per_function: dict[str, int] = {}
    for loop, owner in loops:
        decided = _decide(p, loop, notes, openings)
        if decided is None:
            continue
        choice, block, state = decided
        qualname = p.qualname(owner)
        index = per_function.get(qualname, 0)
        per_function[qualname] = index + 1
        name = f"{prefix}{qualname.replace('<module>', 'module')}.L{index}"
        rewrites[id(loop)] = LoopRewrite(name, choice, state)
        lines = (p.line(block[0]), p.last_line(block[-1]))
        names = tuple(item.name for item in state)
        blocks = (BlockDecision(name, *lines, choice.why, names),)
        decisions.append(LoopDecision(qualname, p.line(loop), _header(p, loop), blocks))
    if not rewrites:
        return Instrumented(filename, source, source, tuple(decisions), tuple(notes))
    variable = LOOP_VARIABLE if LOOP_VARIABLE not in source else LOOP_VARIABLE + "_"
    add_import = not _IMPORTS_FLOR.search(source)
    new = p.module.visit(FlorRewriter(rewrites, variable, add_import))
    return Instrumented(filename, source, new.code, tuple(decisions), tuple(notes))


def _left_unchanged(source: str) -> Note | None:
    """Why a file is not to be rewritten at all, if it is not."""
    if file_opted_out(source):
        return Note(1, "`# flor: skip-file`: left unchanged")
    if _IMPORTS_FLOR.search(source) and _ALREADY.search(source):
        return Note(1, "already instrumented: left unchanged")
    return None


def _decide(
    p: Program, loop: cst.For | cst.While, notes: list[Note], openings: frozenset[str]
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
        choice = choose_block(p, loop, feeds_block, openings)
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
