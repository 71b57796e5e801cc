"""Build the single self-contained manifest schema shipped for editors and validators.

The bundle is plain JSON Schema 2020-12 (every ``$ref`` local), with the project's
conventions made explicit:

* inheritance (``allOf`` with one ``$ref``) is flattened: the child's properties replace the
  base's, then the object is closed with ``additionalProperties: false`` (local bundle; the
  Arena bundle stays open, as the service ignores unknown keys);
* ``x-aliases`` add the alias spellings as properties with the same schema, and a rule that
  no two spellings of one field are both present;
* ``x-discriminator`` without ``x-default-tag`` requires the tag key;
* ``x-partial-of`` becomes an ``anyOf`` of the partial encoder models;
* the manifest root dispatches on ``algorithm.name`` (``if``/``then`` per algorithm, built
  from each algorithm's ``x-agilerl`` metadata) to the algorithm, environment and network
  schemas.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from codegen.catalog import Catalog, base_names, walk_schemas
from codegen.codegen_input import expand_partials, partial_models
from codegen.targets import models_for

BUNDLE_ID = "https://agilerl.dev/schemas/manifest.schema.json"


def flatten(models: dict[str, dict[str, Any]], name: str, closed: bool = True) -> dict[str, Any]:
    """``name``'s schema with inherited properties merged in (and the object closed)."""
    schema = copy.deepcopy(models[name])
    bases = base_names(schema)
    if not bases and "properties" not in schema:
        return schema  # a union
    props: dict[str, Any] = {}
    required: list[str] = []
    for base in bases:
        flat = flatten(models, base, closed)
        props.update(flat.get("properties", {}))
        required += flat.get("required", [])
    own = schema.get("properties", {})
    props.update(own)
    required = [r for r in required if r not in own or "default" not in own[r]]
    required += [r for r in schema.get("required", []) if r not in required]
    schema.pop("unevaluatedProperties", None)
    schema["allOf"] = [s for s in schema.get("allOf", []) if "$ref" not in s or set(s) != {"$ref"}]
    if not schema["allOf"]:
        del schema["allOf"]
    schema["properties"] = props
    if required:
        schema["required"] = required
    if closed or schema.get("x-arena-closed"):
        schema["additionalProperties"] = False
    elif schema.get("additionalProperties") is False:
        del schema["additionalProperties"]
    return schema


def _with_aliases(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    if not props:
        return schema
    out = {}
    for key, prop in props.items():
        out[key] = prop
        spellings = [key, *(a for a in prop.get("x-aliases", []) if a != key)]
        for alias in spellings[1:]:
            copy_ = {k: v for k, v in prop.items() if k != "x-aliases"}
            copy_["description"] = f"Alias of {key}. " + prop.get("description", "")
            copy_["x-alias-of"] = key
            out[alias] = copy_
        # One setting written under two spellings is refused, as the models refuse it.
        for i, first in enumerate(spellings):
            for second in spellings[i + 1:]:
                schema.setdefault("allOf", []).append({"not": {"required": [first, second]}})
    schema["properties"] = out
    return schema


def _discriminators(node: dict[str, Any]) -> dict[str, Any]:
    if "x-discriminator" in node and "x-default-tag" not in node and (
            "oneOf" in node or "anyOf" in node) and "title" not in node:
        node = dict(node)
        node["type"] = "object"
        node["required"] = [node["x-discriminator"]]
    return node


def _foreign_network_keys(models: dict[str, dict[str, Any]], section: str, spec: str
                          ) -> list[str]:
    """Keys of the network ``section`` schema that the algorithm's network class lacks
    (besides ``arch``, which the section moves into ``encoder_config``)."""
    if section == spec:
        return []
    own = set(flatten(models, spec)["properties"]) | {"arch"}
    return sorted(set(models[section]["properties"]) - own)


def _network_absent(catalog: Catalog) -> list[dict[str, Any]]:
    """The manifest's spellings of "no network" (null, ``{}``): the branches of its
    ``network`` property other than the section reference, kept in every dispatch rule."""
    branches = catalog.manifest["properties"]["network"]["anyOf"]
    return [copy.deepcopy(b) for b in branches if "$ref" not in b]


def _dispatch(catalog: Catalog, models: dict[str, dict[str, Any]], target: str
              ) -> list[dict[str, Any]]:
    spec = catalog.manifest["x-dispatch"]
    absent = _network_absent(catalog)
    env_names = catalog.environment_models(target)
    rules = []
    for name in catalog.algorithms():
        if name not in models:
            continue
        md = models[name]["x-agilerl"]
        env = env_names[md["environment"]]
        net = md["network_spec"] if md["network_spec"] in spec["networks"] else "*"
        net_ref = spec["networks"][net].split("#/$defs/")[-1]
        network: dict[str, Any] = {"$ref": f"#/$defs/{net_ref}"}
        foreign = _foreign_network_keys(models, net_ref, md["network_spec"])
        if foreign:  # keys only another network class has (squash_output): not allowed here
            network = {"allOf": [network, {"properties": {k: False for k in foreign}}]}
        rules.append({
            "if": {"properties": {"algorithm": {"properties": {"name": {
                "const": name.removesuffix("Spec")}}}}},
            "then": {"properties": {
                "algorithm": {"$ref": f"#/$defs/{name}"},
                "environment": {"$ref": f"#/$defs/{env}"},
                "network": {"anyOf": [network, *absent]},
            }},
        })
    return rules


def bundled(catalog: Catalog, target: str) -> dict[str, Any]:
    """The bundled manifest schema of ``target`` as a JSON-compatible dict."""
    models = models_for(catalog, target)
    models.update(partial_models(models))
    defs = {}
    for name in models:
        schema = flatten(models, name, closed=target == "local")
        schema = walk_schemas(schema, expand_partials)
        schema = walk_schemas(schema, _discriminators)
        defs[name] = _with_aliases(schema)
    root = copy.deepcopy(catalog.manifest)
    dispatch = root.pop("x-dispatch")
    del dispatch
    root = _with_aliases(root)
    names = [n.removesuffix("Spec") for n in catalog.algorithms() if n in models]
    root["properties"]["algorithm"]["properties"]["name"]["enum"] = names
    root["properties"]["algorithm"]["properties"]["name"].pop("x-enum-from", None)
    root["allOf"] = _dispatch(catalog, models, target)
    if target == "arena":
        # The service warns about unknown keys and drops them, so nothing is closed.
        root.pop("additionalProperties", None)
        root["properties"]["network"] = {
            **{k: v for k, v in root["properties"]["network"].items() if k != "anyOf"},
            "type": ["object", "null"]}
        root["allOf"] = [{**r, "then": {"properties": {k: v for k, v in r["then"]["properties"].items()
                                                        if k != "network"}}}
                         for r in root["allOf"]]
    used = {n for n in defs}
    doc = {"$schema": "https://json-schema.org/draft/2020-12/schema",
           "$id": BUNDLE_ID if target == "local" else BUNDLE_ID.replace("manifest", "arena-manifest"),
           **root, "$defs": {n: defs[n] for n in sorted(used)}}
    return doc


def render(catalog: Catalog, target: str) -> str:
    return json.dumps(bundled(catalog, target), indent=2, ensure_ascii=False) + "\n"
