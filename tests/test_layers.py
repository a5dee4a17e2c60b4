"""The architecture, checked: floors, no cycles, a pure transform, no hidden state.

Floors, top first: ``cli`` · ``launch`` · ``replay`` · ``runtime`` and ``transform``
(beside each other: the runtime gets what it needs of the transform from ``launch``) ·
``runs`` · ``store`` · ``errors`` and ``sources``. A module imports only its own package,
then the floors below; a lazy import inside a function counts like any other.
``flor/__init__.py`` is the facade, above every floor.

Inside a floor, each package says in its docstring what it may import (``Imports: ...``),
and the graph must say exactly that: no package-level cycle, no stale or missing entry.
"""

from __future__ import annotations

import ast
import statistics
from pathlib import Path

from conftest import ROOT

FLOR = ROOT / "flor"
FLOORS = {
    "flor.cli": 6,
    "flor.launch": 5,
    "flor.replay": 4,
    "flor.runtime": 3,
    "flor.transform": 3,
    "flor.runs": 2,
    "flor.store": 1,
    "flor.errors": 0,
    "flor.frameworks": 0,
    "flor.inputs": 1,
    "flor.sources": 0,
}
ALLOWED_STATE = {("flor.runtime.loop.context", "session")}  # the one process session


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(FLOR.rglob("*.py"))}


def package(name: str) -> str:
    """The floor a module belongs to: ``flor.replay.session`` -> ``flor.replay``."""
    return ".".join(name.split(".")[:2])


def imports(name: str, tree: ast.Module, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported flor module, line, runs at import time) for every import in ``tree``."""
    base = name.split(".") if name in known and _is_package(name) else name.split(".")[:-1]
    lazy = _lazy_lines(tree)
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            root = ".".join(base[: len(base) - node.level + 1]) if node.level else ""
            mod = ".".join(p for p in (root, node.module or "") if p)
            subs = [f"{mod}.{a.name}" for a in node.names]
            targets = [s for s in subs if s in known] or [mod]
        for target in targets:
            if target.split(".")[0] == "flor":
                out.append((target, node.lineno, node.lineno not in lazy))
    return out


def _is_package(name: str) -> bool:
    return (ROOT / Path(*name.split(".")) / "__init__.py").exists()


def _lazy_lines(tree: ast.Module) -> set[int]:
    """Lines of imports that do not run when the module is imported: inside functions,
    or under ``if TYPE_CHECKING:``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        deferred = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        )
        if deferred:
            lines.update(n.lineno for n in ast.walk(node) if isinstance(n, ast.stmt))
    return lines


def floor(name: str) -> int:
    return FLOORS.get(package(name), 99 if name == "flor" else -1)


def test_every_module_sits_on_a_floor() -> None:
    stray = [name for name in modules() if name != "flor" and package(name) not in FLOORS]
    assert not stray, f"modules outside every floor: {stray}"


def test_no_import_runs_up_a_floor_or_across_the_ground_floor() -> None:
    found = modules()
    bad = []
    for name, tree in found.items():
        for target, line, _ in imports(name, tree, set(found)):
            same_level_other = floor(target) == floor(name) and package(target) != package(name)
            if floor(target) > floor(name) or (same_level_other and name != "flor"):
                bad.append(f"{name}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_no_import_cycle() -> None:
    found = modules()
    graph = {
        name: {
            t if t in found else package(t)
            for t, _, eager in imports(name, tree, set(found))
            if eager and t != name
        }
        for name, tree in found.items()
    }
    cycle = _find_cycle({n: {t for t in ts if t in graph} for n, ts in graph.items()})
    assert cycle is None, " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1 and not _is_parent(nxt, node):
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _is_parent(package_name: str, module: str) -> bool:
    """A package importing its own submodules while they import it back is how packages work."""
    return module.startswith(package_name + ".")


def room(name: str) -> str:
    """The package a module lives in (a package is its own room); ``flor.errors`` and
    ``flor.sources`` are rooms of their own."""
    if _is_package(name) or name.count(".") == 1:
        return name
    return name.rsplit(".", 1)[0]


def room_graph() -> dict[str, set[str]]:
    """Room -> the other rooms its modules import, lazy imports included."""
    found = modules()
    graph: dict[str, set[str]] = {}
    for name, tree in found.items():
        targets = {room(t) if t in found else t for t, _, _ in imports(name, tree, set(found))}
        graph.setdefault(room(name), set()).update(targets - {room(name)})
    return graph


def declared_imports(package_name: str) -> set[str] | None:
    """What a package's docstring says it may import (``Imports: a, b.``), or None."""
    init = ROOT / Path(*package_name.split(".")) / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    if "Imports:" not in doc:
        return None
    text = " ".join(doc.split("Imports:", 1)[1].split("\n\n", 1)[0].split())
    return {n.strip(" .") for n in text.split(",")} - {"nothing"}


def test_each_package_imports_what_its_docstring_says() -> None:
    graph = room_graph()
    packages = sorted(r for r in graph if _is_package(r) and r != "flor")
    undeclared = [p for p in packages if declared_imports(p) is None]
    assert not undeclared, f"packages whose docstring has no 'Imports:' line: {undeclared}"
    wrong = {
        p: {"undeclared": sorted(graph[p] - said), "stale": sorted(said - graph[p])}
        for p in packages
        if (said := declared_imports(p) or set()) != graph[p]
    }
    assert not wrong, wrong


def test_no_cycle_between_rooms() -> None:
    graph = room_graph()
    rooms = {r: {t for t in ts if t in graph and not _is_parent(r, t)} for r, ts in graph.items()}
    cycle = _find_cycle(rooms)
    assert cycle is None, " -> ".join(cycle or [])


def test_no_cycle_between_modules() -> None:
    """Lazy imports included: a circle of modules through imports inside functions
    (``launch.record -> start -> spawn -> record`` was one) is layering hidden, not absent.
    A package and its own submodules importing each other is how packages work."""
    found = modules()
    graph = {
        name: {
            t
            for t, _, _ in imports(name, tree, set(found))
            if t in found and t != name and not _is_parent(name, t) and not _is_parent(t, name)
        }
        for name, tree in found.items()
    }
    cycle = _find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_transform_is_pure() -> None:
    for name, tree in modules().items():
        if package(name) != "flor.transform":
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.split(".")[0] == "torch" for n in names), f"{name} imports torch"


def test_no_environment_writes() -> None:
    # Except the stand-in for a distributed job: the script reads RANK/WORLD_SIZE/LOCAL_RANK
    # as torchrun would have set them, and nothing else runs in that replay process.
    for name, tree in modules().items():
        if name == "flor.replay.standin":
            continue
        for node in ast.walk(tree):
            text = ast.unparse(node) if isinstance(node, (ast.Assign, ast.Delete, ast.Call)) else ""
            writes = isinstance(node, (ast.Assign, ast.Delete)) and "os.environ[" in text
            calls = isinstance(node, ast.Call) and text.startswith(
                ("os.environ.update", "os.environ.pop", "os.environ.setdefault", "os.putenv")
            )
            assert not (writes or calls), f"{name}:{node.lineno} writes the environment: {text}"


def test_no_module_level_mutable_state() -> None:
    mutable = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
    for name, tree in modules().items():
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            targets = (
                node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            )
            for target in targets:
                label = (name, getattr(target, "id", ""))
                if label in ALLOWED_STATE or label[1] == "__all__":
                    continue
                is_mutable = isinstance(value, mutable) or (
                    isinstance(value, ast.Call)
                    and ast.unparse(value.func) in ("list", "dict", "set")
                )
                assert not is_mutable, f"{name}:{node.lineno} `{label[1]}` is mutable module state"
            if isinstance(node, ast.Global) or any(
                isinstance(n, ast.Global) and not all((name, g) in ALLOWED_STATE for g in n.names)
                for n in ast.walk(node)
            ):
                raise AssertionError(f"{name}:{node.lineno} rebinds a module global")


def test_functions_stay_short() -> None:
    lengths = {
        f"{name}.{node.name}:{node.lineno}": node.end_lineno - node.lineno + 1
        for name, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno
    }
    assert statistics.median(lengths.values()) < 12
    long = {k: v for k, v in lengths.items() if v > 60}
    assert not long, f"functions over 60 lines: {long}"


def test_the_documented_layout_lists_every_module() -> None:
    """docs/architecture.md's layout block names each file of ``flor/``; a folder line stands
    for its ``__init__.py``."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    listed, folder = set(), ""
    for line in block.splitlines():
        name = line.split()[0] if line.strip() else ""
        if line.startswith("flor/") and name.endswith("/"):
            folder = name
            listed.add(f"{name}__init__.py")
        elif line.startswith("flor/"):
            folder = ""
            listed.add(name)
        elif line.startswith("  ") and name.endswith(".py") and folder:
            listed.add(folder + name)
    present = {str(p.relative_to(ROOT)) for p in FLOR.rglob("*.py")}
    assert listed == present, (sorted(present - listed), sorted(listed - present))
