"""``agilerl.algorithms`` names every implemented algorithm for type checkers too."""

from __future__ import annotations

import ast
from pathlib import Path

import agilerl.algorithms as algorithms


def _type_checking_imports() -> set[str]:
    tree = ast.parse(Path(algorithms.__file__).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and ".core." not in stmt.module:
                    names.update(alias.name for alias in stmt.names)
    return names


def test_the_type_checking_names_are_the_implemented_algorithms() -> None:
    assert _type_checking_imports() == set(algorithms.implemented())


def test_each_name_is_the_class_the_registry_loads() -> None:
    tree = ast.parse(Path(algorithms.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                "agilerl.algorithms.") and ".core." not in node.module:
            for alias in node.names:
                assert getattr(algorithms, alias.name).__module__ == node.module
