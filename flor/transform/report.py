"""What the instrumenter decided, as frozen picklable results (LibCST's TransformResult style)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from flor.sources import SourceFile


@dataclass(frozen=True)
class Note:
    """A warning or refusal tied to a line of the user's file."""

    line: int
    message: str


@dataclass(frozen=True)
class BlockDecision:
    name: str
    first_line: int
    last_line: int
    why: str
    state: tuple[str, ...]  # what SkipBlock.end receives, in order


@dataclass(frozen=True)
class LoopDecision:
    function: str  # qualified name of the enclosing function, or "<module>"
    line: int
    header: str
    blocks: tuple[BlockDecision, ...]


@dataclass(frozen=True)
class Instrumented:
    """The outcome of instrumenting one file; the driver never raises for a user's file."""

    filename: str
    original: str
    source: str  # the rewritten file (== original when nothing was instrumented)
    loops: tuple[LoopDecision, ...] = ()
    notes: tuple[Note, ...] = field(default=())
    error: str | None = None  # set when the file could not be parsed
    spawned: bool = False  # the main loop runs in the processes the script's mp.spawn starts
    trainers: tuple[str, ...] = ()  # the library trainers whose loop flor drives, said
    callbacks: tuple[tuple[int, str, str], ...] = ()  # (line, function, handed to) noted

    @property
    def changed(self) -> bool:
        return self.source != self.original

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(keepends=True),
                self.source.splitlines(keepends=True),
                fromfile=self.filename,
                tofile=f"{self.filename} (instrumented)",
            )
        )

    def report(self) -> str:
        """Decisions and warnings, one per line, ``file:line: ...``."""
        if self.error:
            return f"{self.filename}: {self.error}\n"
        lines = []
        for loop in self.loops:
            lines.append(
                f"{self.filename}:{loop.line}: main loop `{loop.header}` in {loop.function}"
            )
            for b in loop.blocks:
                state = ", ".join(b.state) or "nothing"
                lines.append(
                    f"{self.filename}:{b.first_line}-{b.last_line}: block {b.name} ({b.why}); state: {state}"
                )
        for note in self.notes:
            lines.append(f"{self.filename}:{note.line}: warning: {note.message}")
        for found in self.trainers:
            lines.append(f"{self.filename}: {found}; the file is unchanged")
        for line, name, into in self.callbacks:
            lines.append(
                f"{self.filename}:{line}: {name}, handed to {into}(): flor notes which blocks run it"
            )
        if not self.loops and not self.notes and not self.trainers and not self.callbacks:
            lines.append(f"{self.filename}: no training loop found; the file is unchanged")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ProjectInstrumented:
    """The outcome of instrumenting an entry script and the project files it reaches."""

    entry: Instrumented
    others: tuple[Instrumented, ...] = ()  # other files with a main loop (rewritten, or why not)
    files: tuple[SourceFile, ...] = ()  # every project file the entry imports, transitively

    @property
    def all(self) -> tuple[Instrumented, ...]:
        return (self.entry, *self.others)

    def report(self) -> str:
        """Each file's decisions; "no training loop found" only when no file has one."""
        if self.entry.error or not self.others:
            return self.entry.report()
        return "".join(r.report() for r in self.all if r.loops or r.notes or r.callbacks)

    def diff(self) -> str:
        return "".join(r.diff() for r in self.all)
