"""The packages of ``agilerl`` stand in floors, and imports only point down.

Every ``import`` of the package's modules (top-level or inside a function: a function-local
import ties modules together just the same; those under ``if TYPE_CHECKING`` are left out)
is read with ``ast`` and mapped to its unit: a sub-package of ``agilerl`` (or one of the
sub-packages named in :data:`UNITS`). A unit may import units on floors below its own, and
never one on its floor or above, so no two units can import each other.

:data:`ALLOWED` lists the arrows up that stay, each with its reason: methods of the
reference's public API that bridge to a floor above, imported only when called. The test
fails on any other arrow up, and on an entry of ``ALLOWED`` that no longer exists.

Modules are held to the same rule inside a unit: no two import each other, directly or
through others (a strongly connected component of the module graph, read the same way).
The bridges of :data:`ALLOWED` are left out of that graph: each imports the floor above only
when called, which the floor test checks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agilerl"

#: Bottom first. Units on one line share a floor (and so may not import each other).
FLOORS = """
agilerl.core
agilerl.version agilerl.input_files agilerl.run_folder agilerl.env_registry
agilerl.components agilerl.checkpoint
agilerl.envs
agilerl.llm
agilerl.models
agilerl.arena.models
agilerl.modules
agilerl.networks agilerl.hpo agilerl.logging
agilerl.algorithms.core
agilerl.algorithms
agilerl.population agilerl.evaluation
agilerl.training
agilerl.arena
agilerl.dashboard
agilerl.cli agilerl.arena.server agilerl.demo
agilerl.train agilerl.__main__ agilerl.schemas
"""

#: Sub-packages that are units of their own (others belong to their top-level package).
UNITS = ("agilerl.arena.models", "agilerl.arena.server", "agilerl.algorithms.core")

#: (importing module, imported unit) -> why the arrow up stays.
ALLOWED = {
    ("agilerl.training.trainer", "agilerl.arena"):
        "the reference's users import ArenaTrainer from agilerl.training.trainer "
        "(a lazy module __getattr__; importing the trainer does not import the client)",
    ("agilerl.models.manifest", "agilerl.arena.models"):
        "TrainingManifest.to_arena_manifest, the reference's bridge to the Arena model, "
        "imports it when called",
}

def unit_of(module: str) -> str:
    for unit in UNITS:
        if module == unit or module.startswith(unit + "."):
            return unit
    return ".".join(module.split(".")[:2])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Modules of ``agilerl`` that ``path`` imports, outside ``if TYPE_CHECKING`` blocks."""
    tree = ast.parse(path.read_text())
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names
                         if (PACKAGE.parent / f"{base}.{alias.name}".replace(".", "/")).is_dir()
                         or (PACKAGE.parent / (f"{base}.{alias.name}".replace(".", "/") + ".py"))
                         .is_file())
    return {m for m in found if m == "agilerl" or m.startswith("agilerl.")}


@cache
def module_imports() -> dict[str, frozenset[str]]:
    """Module -> the modules of ``agilerl`` it imports. The package root (always loaded
    first, importing nothing eagerly) and generated code are left out as importers."""
    return {module_name(path): frozenset(imported_modules(path))
            for path in sorted(PACKAGE.rglob("*.py"))
            if "_generated" not in path.parts and path != PACKAGE / "__init__.py"}


@cache
def arrows_up() -> dict[tuple[str, str], str]:
    """(importing module, imported unit) -> the imported module, for every arrow that does
    not point down."""
    floor = {unit: level for level, line in enumerate(FLOORS.strip().splitlines())
             for unit in line.split()}
    found: dict[tuple[str, str], str] = {}
    for importer, imported in module_imports().items():
        source = unit_of(importer)
        assert source in floor, f"{importer}: its unit {source} is on no floor of FLOORS"
        for target_module in sorted(imported):
            target = unit_of(target_module)
            if target_module == "agilerl" or target == source:
                continue
            assert target in floor, f"{target_module}: its unit {target} is on no floor"
            if floor[target] >= floor[source]:
                found[(importer, target)] = target_module
    return found


def test_imports_point_down_the_floors() -> None:
    found = arrows_up()
    unexpected = sorted(f"{importer} imports {found[(importer, unit)]} (unit {unit})"
                        for importer, unit in found if (importer, unit) not in ALLOWED)
    assert unexpected == [], "imports that point up or sideways:\n" + "\n".join(unexpected)


def test_the_allowed_arrows_are_current() -> None:
    found = arrows_up()
    gone = sorted(f"{importer} -> {unit}" for importer, unit in ALLOWED
                  if (importer, unit) not in found)
    assert gone == [], "no longer imported; remove from ALLOWED:\n" + "\n".join(gone)


def test_allowed_arrows_are_imported_only_inside_functions() -> None:
    """A bridge may not load the floor above when its module is imported."""
    for importer, unit in ALLOWED:
        path = PACKAGE.parent / (importer.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text())
        eager = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
                 and unit in {unit_of(m) for m in _names(node)}]
        assert eager == [], f"{importer} imports {unit} at module level"


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [node.module or ""]


def test_function_local_imports_count() -> None:
    """``paradigms`` imports the LLM loop only inside a function: still an arrow."""
    assert "agilerl.training.llm" in imported_modules(PACKAGE / "training" / "paradigms.py")


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one node (Tarjan), each sorted: the
    sets of nodes that all reach each other through the graph's arrows."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


@cache
def module_cycles() -> list[tuple[str, ...]]:
    """The groups of modules of ``agilerl`` that import each other, directly or through
    others (function-local imports count; ``if TYPE_CHECKING`` ones and the bridges of
    :data:`ALLOWED` do not)."""
    graph = {importer: {m for m in imported if (importer, unit_of(m)) not in ALLOWED}
             for importer, imported in module_imports().items()}
    return strongly_connected(graph)


def _described(cycle: tuple[str, ...]) -> str:
    graph = module_imports()
    arrows = [f"    {module} imports {', '.join(sorted(graph[module] & set(cycle)))}"
              for module in cycle]
    return "  " + " / ".join(cycle) + "\n" + "\n".join(arrows)


def test_no_import_cycle_between_modules() -> None:
    """Two modules that need each other share a piece: it goes into a module both import
    (or is passed in); a function-local import only hides the cycle."""
    unexpected = module_cycles()
    assert unexpected == [], ("modules that import each other (directly or through "
                              "others):\n" + "\n".join(map(_described, unexpected)))


def test_strongly_connected_finds_each_cycle_once() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e", "d"],
             "f": ["g"], "g": ["f", "a"]}
    assert strongly_connected(graph) == [("a", "b", "c"), ("f", "g")]
