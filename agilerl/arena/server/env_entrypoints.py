"""Find the environment classes in an uploaded source folder without running it.

The Python files are parsed (never imported): a class is an entrypoint when it derives,
directly or through other classes of the same upload, from one of :data:`ENV_BASES`
(``gymnasium.Env``, ``gym.Env``, PettingZoo's ``ParallelEnv`` or ``AECEnv``, ...).
Entry points read ``module:Class``, with ``module`` the file's dotted path under the
source folder, which is how the trainer resolves them (``environment.path`` = the folder).
"""

from __future__ import annotations

import ast
from pathlib import Path

#: the last part of a base class name that makes a class an environment.
ENV_BASES = frozenset({"Env", "ParallelEnv", "AECEnv", "GemEnv", "AnylogicSim"})
MAX_FILE_BYTES = 1 << 20
MAX_FILES = 500


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):  # Env[ObsType, ActType]
        return _base_name(node.value)
    return ""


def _module_name(source: Path, file: Path) -> str | None:
    rel = file.relative_to(source).with_suffix("")
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def _classes(file: Path) -> list[tuple[str, list[str]]]:
    if file.stat().st_size > MAX_FILE_BYTES:
        return []
    try:
        tree = ast.parse(file.read_text(encoding="utf-8", errors="replace"), str(file))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [(node.name, [_base_name(b) for b in node.bases])
            for node in tree.body if isinstance(node, ast.ClassDef)]


def find_entrypoints(source: Path) -> list[str]:
    """``module:Class`` for each environment class under ``source``, sorted."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for file in sorted(source.rglob("*.py"))[:MAX_FILES]:
        if file.is_symlink() or not file.is_file():
            continue
        module = _module_name(source, file)
        if module is not None:
            found[module] = _classes(file)
    env_classes = set(ENV_BASES)
    changed = True
    while changed:  # classes deriving from the upload's own environment classes
        changed = False
        for classes in found.values():
            for name, bases in classes:
                if name not in env_classes and env_classes.intersection(bases):
                    env_classes.add(name)
                    changed = True
    return sorted(f"{module}:{name}" for module, classes in found.items()
                  for name, bases in classes if env_classes.intersection(bases))
