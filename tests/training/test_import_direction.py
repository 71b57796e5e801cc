"""``agilerl.training`` imports point one way: trainer -> session -> build/resume ->
paradigms -> errors. No module below the trainer imports it, not even inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TRAINING = Path(__file__).resolve().parents[2] / "agilerl" / "training"

#: Module -> the ``agilerl.training`` modules it must never import at run time.
FORBIDDEN = {
    "errors": {"*"},
    "paradigms": {"trainer", "session", "build", "resume"},
    "build": {"trainer", "session", "resume"},
    "resume": {"trainer", "session"},
    "session": {"trainer"},
}


def _runtime_imports(path: Path) -> set[str]:
    """``agilerl.training`` submodules imported by ``path`` outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("agilerl.training."):
                found.add(name.split(".")[2])
    return found


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_imports_point_one_way(module: str) -> None:
    imported = _runtime_imports(TRAINING / f"{module}.py")
    forbidden = FORBIDDEN[module]
    bad = imported if "*" in forbidden else imported & forbidden
    assert not bad, f"agilerl/training/{module}.py imports {sorted(bad)}"


def test_the_checker_sees_function_level_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from agilerl.training.session import X\n"
                      "def f():\n    from agilerl.training.trainer import LocalTrainer\n")
    assert _runtime_imports(source) == {"trainer"}
