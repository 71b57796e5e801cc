"""Dotted command-line overrides of manifest values (``training.pop_size=8``).

Each override is ``PATH=VALUE``: ``PATH`` is a dotted path of mapping keys (a list item is
addressed by its index, ``network.encoder_config.hidden_size.0=64``) and ``VALUE`` is parsed as
a YAML scalar or flow collection by the manifest files' own loader, so it means exactly
what it would in the file (``3e-4``, ``2e3`` and ``1_000`` are numbers, an integral float
such as ``2e3`` fits an integer field, ``true`` is a boolean, ``null`` clears a value,
``[64, 64]`` is a list).
Missing intermediate mappings are created, so an override can add a section key; a path
that goes through a scalar (``training.max_steps.foo=1``) is an :class:`OverrideError`
(a usage error). The overridden manifest is then validated like the file itself and
problems at an overridden path are reported naming the override.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from agilerl.core.manifest_errors import ManifestError
from agilerl.core.value_types import JsonObject, JsonValue
from agilerl.models.loading import parse_value


class OverrideError(ValueError):
    """An override that cannot be parsed or applied (names the override text)."""


@dataclass(frozen=True)
class Override:
    """One parsed ``PATH=VALUE`` override."""

    text: str
    path: tuple[str, ...]
    value: JsonValue

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def parse_override(text: str) -> Override:
    """Parse ``PATH=VALUE`` (raises :class:`OverrideError` naming ``text``)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(
            f"override {text!r}: expected PATH=VALUE, e.g. training.pop_size=8"
        )
    parts = tuple(key.split("."))
    if any(not p for p in parts):
        raise OverrideError(f"override {text!r}: empty key in path {key!r}")
    try:
        value = parse_value(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise OverrideError(f"override {text!r}: value {raw!r} is not valid YAML: {problem}") from None
    except ManifestError as exc:  # an alias bomb, a self-reference
        raise OverrideError(f"override {text!r}: {exc.issues[0].message}") from None
    return Override(text=text, path=parts, value=value)


def parse_overrides(texts: Sequence[str]) -> list[Override]:
    return [parse_override(t) for t in texts]


def apply_overrides(data: object, overrides: Sequence[Override]) -> JsonObject:
    """Return a deep copy of the manifest mapping ``data`` with ``overrides`` applied."""
    if not isinstance(data, Mapping):
        raise OverrideError("overrides need a manifest that is a mapping")
    result: JsonObject = copy.deepcopy(dict(data))
    for override in overrides:
        node: JsonValue = result
        for depth, key in enumerate(override.path[:-1]):
            node = _descend(node, key, override, depth)
        _assign(node, override.path[-1], override)
    return result


def _descend(node: JsonValue, key: str, override: Override, depth: int) -> JsonValue:
    where = ".".join(override.path[: depth + 1])
    if isinstance(node, list):
        index = _index(node, key, override, where)
        return node[index]
    if not isinstance(node, dict):
        raise OverrideError(f"override {override.text!r}: {where!r} is inside a non-mapping value")
    child = node.get(key)
    if child is None:
        child = node[key] = {}
    if not isinstance(child, dict | list):
        raise OverrideError(
            f"override {override.text!r}: {where!r} is {child!r}, not a mapping, so it has "
            f"no key {override.path[depth + 1]!r}; write {where}=VALUE to replace it"
        )
    return child


def _assign(node: JsonValue, key: str, override: Override) -> None:
    if isinstance(node, list):
        node[_index(node, key, override, override.dotted)] = override.value
    elif isinstance(node, dict):
        node[key] = override.value
    else:  # pragma: no cover - _descend guarantees a container
        raise OverrideError(f"override {override.text!r}: cannot set {override.dotted!r}")


def _index(node: Sequence[object], key: str, override: Override, where: str) -> int:
    if not key.lstrip("-").isdigit() or not -len(node) <= int(key) < len(node):
        raise OverrideError(
            f"override {override.text!r}: {where!r} addresses a list of {len(node)} items; "
            f"use an index 0..{len(node) - 1}"
        )
    return int(key)


def override_for_path(path: str, overrides: Sequence[Override]) -> Override | None:
    """The last override whose path equals ``path`` or is a prefix / extension of it."""
    for override in reversed(overrides):
        dotted = override.dotted
        if path == dotted or path.startswith(dotted + ".") or dotted.startswith(path + "."):
            return override
        # Error paths may spell list indices as ``[0]``.
        normal = path.replace("[", ".").replace("]", "")
        if normal == dotted or normal.startswith(dotted + "."):
            return override
    return None
