"""Resolve ``"<module-or-file>:<attr>"`` references to Python objects.

One rule serves every place a manifest names user code: Gymnasium and PettingZoo
entrypoints, bandit and multi-turn LLM entrypoints, and ``"module:attr"`` wrappers.

Resolution (manifest spec §3.2, "Custom entrypoint resolution"):

1. split the reference at the **last** ``:`` into a module reference and an attribute;
   both must be non-empty;
2. the base directory is ``path`` when given, else the current working directory;
3. candidate files, relative to the base directory unless absolute: the reference as
   given, the reference with ``.`` replaced by the path separator, and each of those with
   ``.py`` appended (unless it already ends in ``.py``); the first existing file is
   executed as a fresh module under a synthetic name (with its folder importable while it
   runs, so it can import sibling files);
4. otherwise the reference is imported as an ordinary module.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["load_module", "resolve_entrypoint", "split_reference"]


def split_reference(ref: str) -> tuple[str, str]:
    """Split ``"module:attr"`` at the last colon; raise ``ValueError`` when malformed."""
    if not isinstance(ref, str) or ":" not in ref:
        raise ValueError(
            f"Invalid entrypoint format {ref!r}: expected '<module-or-file>:<attribute>'."
        )
    module_ref, _, attr = ref.rpartition(":")
    if not module_ref or not attr:
        raise ValueError(
            f"Invalid entrypoint format {ref!r}: expected '<module-or-file>:<attribute>' "
            "with both parts non-empty."
        )
    return module_ref, attr


def _candidate_files(module_ref: str, base: Path) -> list[Path]:
    names = [module_ref]
    dotted_as_path = module_ref.replace(".", os.sep)
    if dotted_as_path != module_ref:
        names.append(dotted_as_path)
    candidates: list[Path] = []
    for name in names:
        variants = [name] if name.endswith(".py") else [name, name + ".py"]
        for variant in variants:
            path = Path(variant)
            candidates.append(path if path.is_absolute() else base / path)
    # "pkg.mod.py" with dots replaced becomes "pkg/mod/py"; the as-given variant covers it.
    return candidates


def _exec_file(file: Path) -> ModuleType:
    # A synthetic name keeps two user files called ``env.py`` in different folders apart
    # and never shadows an importable module.
    digest = hashlib.sha1(str(file).encode()).hexdigest()[:12]
    name = f"_agilerl_user_{file.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:  # pragma: no cover - only for odd suffixes
        raise ModuleNotFoundError(f"Could not resolve module from file '{file}'.")
    module = importlib.util.module_from_spec(spec)
    # Registered before execution so dataclasses and pickling inside the file work.
    sys.modules[name] = module
    # The file's folder is importable while it runs, so ``import helpers`` of a sibling
    # file works as it would with ``python file.py``.
    folder = str(file.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    return module


def load_module(module_ref: str, path: str | os.PathLike[str] | None = None) -> ModuleType:
    """Load ``module_ref`` from a file under ``path`` (or the cwd), else import it."""
    base = Path(path).expanduser().resolve() if path else Path.cwd()
    for candidate in _candidate_files(module_ref, base):
        if candidate.is_file():
            return _exec_file(candidate)
    try:
        return importlib.import_module(module_ref)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_ref
        # Only translate "the module itself is missing"; a missing import *inside* an
        # existing module is the user's real error and keeps its own message.
        if module_ref == missing or module_ref.startswith(missing + "."):
            raise ModuleNotFoundError(
                f"Could not resolve module '{module_ref}': no file matching it under "
                f"'{base}' and it is not importable.",
                name=module_ref,
            ) from exc
        raise
    except (ImportError, ValueError, TypeError) as exc:
        # e.g. a relative or otherwise malformed module name
        raise ModuleNotFoundError(
            f"Could not resolve module '{module_ref}': {exc}", name=module_ref
        ) from exc


def resolve_entrypoint(
    ref: str, path: str | os.PathLike[str] | None = None, *, require_callable: bool = True
) -> Any:
    """Return the object named by ``ref`` (``"<module-or-file>:<attr>"``).

    Args:
        ref: the reference; split at the last ``:``.
        path: base directory for file candidates (default: the current working directory).
        require_callable: raise ``TypeError`` when the target cannot be called.

    Raises:
        ValueError: "Invalid entrypoint format" when ``ref`` has no ``:`` or an empty part.
        ModuleNotFoundError: "Could not resolve module" when neither a file nor a module.
        AttributeError: "Module '...' does not define '...'" when the attribute is missing.
        TypeError: "... resolved to non-callable object." when the target is not callable.
    """
    module_ref, attr = split_reference(ref)
    module = load_module(module_ref, path)
    try:
        target = getattr(module, attr)
    except AttributeError:
        raise AttributeError(f"Module '{module_ref}' does not define '{attr}'.") from None
    if require_callable and not callable(target):
        raise TypeError(f"Entrypoint '{ref}' resolved to non-callable object.")
    return target
