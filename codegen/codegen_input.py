"""Turn a target's models into the single JSON Schema document fed to datamodel-codegen.

Only what shapes the Python classes survives: types, bounds, defaults, descriptions,
inheritance (``allOf`` with one ``$ref``) and the custom keywords the post-processor reads
(``x-aliases``, ``x-runtime-only``, ``x-exclude``). Closure (``additionalProperties:
false``) is carried by the generated base class instead (``extra="forbid"``).
"""

from __future__ import annotations

import copy
from typing import Any

from codegen.catalog import walk_schemas

# Custom keywords rendered into Field(json_schema_extra=...) so the post-processor sees them.
FIELD_MARKERS = ("x-aliases", "x-runtime-only", "x-python-objects", "x-exclude", "x-arena-exclude",
                 "x-not-null", "x-discriminator", "x-default-tag")
_DROP = ("examples", "title", "$comment")


def partial_name(name: str) -> str:
    return name.replace("Spec", "") + "PartialSpec"


def partial_models(models: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Encoder variants with no required fields and no defaults, for networks whose
    architecture is inferred at build time."""
    out: dict[str, dict[str, Any]] = {}
    for schema in models.values():
        for prop in schema.get("properties", {}).values():
            for ref in prop.get("x-partial-of", []):
                base = ref["$ref"].removeprefix("#/$defs/")
                part = copy.deepcopy(models[base])
                part.pop("required", None)
                for field in part.get("properties", {}).values():
                    # Any subset of the fields; nothing is filled in (dumps echo the input).
                    field.pop("default", None)
                    field["x-optional"] = True
                part["title"] = partial_name(base)
                part["description"] = (f"{base} with every field optional: the encoder of a "
                                       "network whose architecture is inferred at build time.")
                out[partial_name(base)] = part
    return out


def expand_partials(node: dict[str, Any]) -> dict[str, Any]:
    """Replace ``x-partial-of`` with an ``anyOf`` of the partial models."""
    if "x-partial-of" in node:
        node = dict(node)
        variants = node.pop("x-partial-of")
        node["anyOf"] = [{"$ref": "#/$defs/" + partial_name(v["$ref"].removeprefix("#/$defs/"))}
                         for v in variants]
    return node


def _strip(node: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in node.items():
        if key in _DROP and not isinstance(value, dict):
            continue
        if key in ("additionalProperties", "unevaluatedProperties") and value is False:
            continue
        if key.startswith("x-") and key not in FIELD_MARKERS:
            continue
        out[key] = value
    if "allOf" in out:
        # Keep inheritance; drop conditional rules (if/then), which Python checks elsewhere.
        out["allOf"] = [s for s in out["allOf"] if "$ref" in s]
        if not out["allOf"]:
            del out["allOf"]
    return out


def mark_not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """Flag optional properties that have no default and do not accept null.

    datamodel-codegen gives them ``= None``; the flag makes the model reject an explicit null,
    as JSON Schema does.
    """
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        if name in required or "default" in prop or prop.get("x-runtime-only"):
            continue
        types = prop.get("type")
        nullable = (types == "null" or (isinstance(types, list) and "null" in types)
                    or None in prop.get("enum", [])
                    or any(s.get("type") == "null" for s in prop.get("anyOf", [])))
        if not nullable:
            prop["x-not-null"] = True
    return schema


def codegen_document(models: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One JSON Schema document with every model under ``$defs``."""
    everything = {**models, **partial_models(models)}
    defs = {}
    for name, schema in everything.items():
        schema = mark_not_null(walk_schemas(copy.deepcopy(schema), expand_partials))
        schema = walk_schemas(schema, _strip)
        schema["title"] = name
        defs[name] = schema
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Models", "type": "object", "$defs": defs}
