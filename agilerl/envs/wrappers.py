"""Wrapper forms accepted by an environment spec's ``wrappers`` list.

Each entry is applied in list order as ``wrapper(env, **kwargs)`` and may be written as

* a callable (a wrapper class or a function taking the env);
* ``"module:attr"``: resolved like an entrypoint, relative to the spec's ``path``;
* ``"pkg.mod.Attr"``: a dotted import path;
* a pair ``(wrapper, kwargs)``; YAML writes it as ``["module:Wrapper", {tag: x}]``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar, cast

from agilerl.envs.entrypoint import resolve_entrypoint

__all__ = ["ResolvedWrapper", "apply_wrappers", "resolve_wrapper", "resolve_wrappers"]

EnvT = TypeVar("EnvT")
ResolvedWrapper = tuple[Callable[..., object], dict[str, object]]
"""A wrapper callable with the keyword arguments it is applied with."""


def _resolve_dotted(ref: str) -> Callable[..., object]:
    module_name, _, attr = ref.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"Could not resolve module '{module_name}' for wrapper '{ref}'.", name=module_name
        ) from exc
    try:
        target = getattr(module, attr)
    except AttributeError:
        raise AttributeError(f"Module '{module_name}' does not define '{attr}'.") from None
    if not callable(target):
        raise TypeError(f"Wrapper '{ref}' resolved to non-callable object.")
    return target


def _resolve_target(target: object,
                    path: str | os.PathLike[str] | None) -> Callable[..., object]:
    if isinstance(target, str):
        if ":" in target:
            return resolve_entrypoint(target, path)
        if "." in target:
            return _resolve_dotted(target)
        raise ValueError(
            f"Invalid wrapper {target!r}: use 'module:Attr', a dotted 'package.module.Attr' "
            "path, or a callable."
        )
    if callable(target):
        return target
    raise TypeError(f"Invalid wrapper {target!r}: expected a callable or a string reference.")


def resolve_wrapper(entry: object,
                    path: str | os.PathLike[str] | None = None) -> ResolvedWrapper:
    """Turn one ``wrappers`` entry into ``(callable, kwargs)``."""
    if isinstance(entry, Sequence) and not isinstance(entry, str):
        if len(entry) != 2 or not isinstance(entry[1], Mapping):
            raise ValueError(
                f"Invalid wrapper entry {entry!r}: a list entry must be a pair "
                "[wrapper, {keyword: value}]."
            )
        return _resolve_target(entry[0], path), dict(entry[1])
    return _resolve_target(entry, path), {}


def resolve_wrappers(
    entries: Sequence[object] | None, path: str | os.PathLike[str] | None = None
) -> list[ResolvedWrapper]:
    """Resolve a whole ``wrappers`` list once (before building many sub-envs)."""
    return [resolve_wrapper(entry, path) for entry in entries or ()]


def apply_wrappers(env: EnvT, wrappers: Sequence[ResolvedWrapper]) -> EnvT:
    """Apply resolved wrappers in order (each returns the env it wraps, wrapped)."""
    for wrapper, kwargs in wrappers:
        env = cast(EnvT, wrapper(env, **kwargs))
    return env
