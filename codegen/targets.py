"""Derive the model set of each generation target from the one set of schemas.

``local`` is what this package validates and trains with; ``arena`` is the light model set of
the hosted service. Arena differences are marked in the schemas with custom keywords:

* ``x-arena: false`` on a model or property: absent on Arena.
* ``x-arena-only: true`` on a model: only on Arena.
* ``x-arena-schema``: the property's type on Arena (replaces its local type; description,
  default and examples are kept unless it gives its own).
* ``x-arena-minimum``: a stricter lower bound on Arena.
* ``x-arena-closed: true`` on a model: rejects unknown keys on Arena too (Arena models
  otherwise ignore them, as the service does).
* ``x-agilerl.arena: false`` on an algorithm: not eligible on Arena.
* ``x-runtime-only: true``: a Python-only field; absent on Arena unless it has an
  ``x-arena-schema``.
"""

from __future__ import annotations

import copy
from typing import Any

from codegen.catalog import Catalog, base_names, refs_in, walk_schemas

TARGETS = ("local", "arena")
_DOC_KEYS = ("description", "default", "examples")


def _drop(schema: dict[str, Any], target: str) -> bool:
    if target == "local":
        return bool(schema.get("x-arena-only"))
    return schema.get("x-arena") is False or schema.get("x-agilerl", {}).get("arena") is False


def _arena_property(prop: dict[str, Any]) -> dict[str, Any] | None:
    if prop.get("x-arena") is False:
        return None
    if "x-arena-schema" in prop:
        new = copy.deepcopy(prop["x-arena-schema"])
        new.update({k: prop[k] for k in _DOC_KEYS if k in prop and k not in new})
        return new
    if prop.get("x-runtime-only"):
        return None
    new = dict(prop)
    if "x-arena-minimum" in new:
        new["minimum"] = new.pop("x-arena-minimum")
    return new


def _clean_local(prop: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in prop.items() if k not in ("x-arena-schema", "x-arena-minimum")}


def models_for(catalog: Catalog, target: str) -> dict[str, dict[str, Any]]:
    """The models of ``target`` (name -> schema), Arena keywords resolved."""
    assert target in TARGETS
    kept = {n: s for n, s in catalog.models.items() if not _drop(s, target)}

    def prune_unions(node: dict[str, Any]) -> dict[str, Any]:
        for key in ("oneOf", "anyOf"):
            if key in node:
                node[key] = [s for s in node[key]
                             if s.get("$ref", "#/$defs/").removeprefix("#/$defs/") in kept
                             or "$ref" not in s]
                if len(node[key]) == 1 and set(node) <= {key, *_DOC_KEYS, "title",
                                                         "x-discriminator", "x-default-tag"}:
                    node.update(node.pop(key)[0])
        return node

    out: dict[str, dict[str, Any]] = {}
    for name, schema in kept.items():
        schema = copy.deepcopy(schema)
        if "properties" in schema:
            props = schema["properties"]
            schema["properties"] = (
                {k: p2 for k, p in props.items() if (p2 := _arena_property(p)) is not None}
                if target == "arena" else {k: _clean_local(p) for k, p in props.items()})
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r in schema.get("properties", {})]
        out[name] = walk_schemas(schema, prune_unions)
    missing = {r for s in out.values() for r in refs_in(s)} - set(out)
    if missing:
        raise ValueError(f"{target}: models referenced but dropped: {sorted(missing)}")
    for name, schema in out.items():
        for base in base_names(schema):
            if base not in out:
                raise ValueError(f"{target}: {name} inherits from dropped model {base}")
    return out
