"""Load the schema files under ``schemas/`` and name every model they define.

A *model* is an object schema with a ``title`` (a file's root) or an entry of a file's
``$defs``; its name is the Python class name. Every ``$ref`` between files is rewritten to
``#/$defs/<Name>`` so later stages work on one flat namespace.
"""

from __future__ import annotations

import copy
import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_SUFFIX = ".schema.json"
#: Schemas of run-folder files, not of the manifest: no model is built from them (codegen
#: only copies them into the package, see ``generate.COPIED_SCHEMAS``).
NOT_MANIFEST = ("run_events.schema.json",)
# Keys that hold sub-schemas (values are schemas, lists of schemas, or maps of schemas).
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "unevaluatedProperties", "not", "if", "then", "else",
               "contains", "propertyNames")


@dataclass
class Catalog:
    """All models by name, in a stable order, plus the file each came from."""

    root: Path
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    def environment_models(self, target: str = "local") -> dict[str, str]:
        """Environment kind (``x-agilerl.environment``) -> environment model name; on Arena
        every kind maps to the one generic environment model."""
        dispatch = self.manifest["x-dispatch"]
        kinds = dispatch["environments"]
        if target == "arena":
            kinds = {kind: dispatch["arena_environment"] for kind in kinds}
        return {kind: next(n for n, o in self.origin.items() if o == rel)
                for kind, rel in kinds.items()}

    def algorithms(self) -> list[str]:
        """Algorithm model names (those carrying ``x-agilerl`` metadata), in file order."""
        return [n for n, s in self.models.items() if "x-agilerl" in s]


def walk_schemas(schema: Any, fn: Any) -> Any:
    """Return a copy of ``schema`` with ``fn`` applied bottom-up to every sub-schema."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: walk_schemas(v, fn) for k, v in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [walk_schemas(v, fn) for v in out[key]]
    for key in _SCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = walk_schemas(out[key], fn)
    for key, value in list(out.items()):
        # Custom keywords that carry schemas (x-arena-schema, x-partial-of).
        if key == "x-arena-schema" and isinstance(value, dict):
            out[key] = walk_schemas(value, fn)
        elif key == "x-partial-of" and isinstance(value, list):
            out[key] = [walk_schemas(v, fn) for v in value]
    return fn(out)


def _is_model(schema: dict[str, Any]) -> bool:
    return "title" in schema and ("properties" in schema or "allOf" in schema or "oneOf" in schema
                                  or "anyOf" in schema)


def load(root: Path) -> Catalog:
    """Read every ``*.schema.json`` below ``root`` (sorted) into a :class:`Catalog`."""
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*" + SCHEMA_SUFFIX)
                   if "bundle" not in p.parts
                   and p.relative_to(root).as_posix() not in NOT_MANIFEST)
    docs = {rel: json.loads((root / rel).read_text(encoding="utf-8")) for rel in files}
    names: dict[tuple[str, str], str] = {}
    for rel, doc in docs.items():
        if _is_model(doc) and rel != "manifest.schema.json":
            names[(rel, "")] = doc["title"]
        for key in doc.get("$defs", {}):
            names[(rel, "/$defs/" + key)] = key

    def rewriter(rel: str) -> Any:
        def fn(node: dict[str, Any]) -> dict[str, Any]:
            ref = node.get("$ref")
            if isinstance(ref, str):
                target_file, _, pointer = ref.partition("#")
                target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target_file)) \
                    if target_file else rel
                key = (target, pointer)
                if key not in names:
                    raise ValueError(f"{rel}: unresolved $ref {ref!r}")
                node = dict(node)
                node["$ref"] = "#/$defs/" + names[key]
            return node
        return fn

    catalog = Catalog(root=root)
    for (rel, pointer), name in names.items():
        doc = docs[rel]
        raw = doc if pointer == "" else doc["$defs"][name]
        raw = {k: v for k, v in raw.items() if k not in ("$defs", "$schema", "$id")}
        if name in catalog.models:
            raise ValueError(f"model name {name!r} defined twice ({catalog.origin[name]}, {rel})")
        catalog.models[name] = walk_schemas(copy.deepcopy(raw), rewriter(rel))
        catalog.origin[name] = rel
    manifest = {k: v for k, v in docs["manifest.schema.json"].items() if k not in ("$schema", "$id")}
    catalog.manifest = walk_schemas(manifest, rewriter("manifest.schema.json"))
    return catalog


def base_names(schema: dict[str, Any]) -> list[str]:
    """Names of the models a model inherits from (its ``allOf`` ``$ref`` entries)."""
    return [s["$ref"].removeprefix("#/$defs/") for s in schema.get("allOf", [])
            if set(s) == {"$ref"}]


def refs_in(schema: Any) -> set[str]:
    """Every model name referenced anywhere inside ``schema``."""
    found: set[str] = set()

    def fn(node: dict[str, Any]) -> dict[str, Any]:
        if isinstance(node.get("$ref"), str):
            found.add(node["$ref"].removeprefix("#/$defs/"))
        return node
    walk_schemas(schema, fn)
    return found
