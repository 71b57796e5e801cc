"""Field by field, the bundle and the generated models accept and reject the same values.

For every model and property: each documented example is valid for both; values just
outside each bound, values of the wrong JSON type and null (where not allowed) are invalid
for both.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError
from schema_agreement import ARENA_BUNDLE, BUNDLE

from agilerl.arena.models._generated import models as arena_models
from agilerl.models._generated import models as local_models

TARGETS = {"local": (BUNDLE, local_models), "arena": (ARENA_BUNDLE, arena_models)}
DEFS = {t: json.loads(path.read_text(encoding="utf-8"))["$defs"] for t, (path, _) in TARGETS.items()}
MODELS = sorted((t, n) for t, (_, module) in TARGETS.items() for n, s in DEFS[t].items()
                if "properties" in s and isinstance(getattr(module, n, None), type))
IDS = [f"{t}-{n}" for t, n in MODELS]


def _validator(target: str, name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({"$defs": DEFS[target], "$ref": f"#/$defs/{name}"})


def _base(target: str, name: str) -> dict[str, Any]:
    schema = DEFS[target][name]
    return {k: schema["properties"][k]["examples"][0] for k in schema.get("required", [])}


def _pydantic_ok(target: str, name: str, doc: dict[str, Any]) -> bool:
    try:
        getattr(TARGETS[target][1], name).model_validate(doc)
    except ValidationError:
        return False
    return True


def _wrong_values(prop: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key, delta in (("minimum", -1), ("exclusiveMinimum", 0), ("maximum", 1),
                       ("exclusiveMaximum", 0)):
        if key in prop:
            out.append(prop[key] + delta if delta else prop[key])
    types = prop.get("type")
    types = types if isinstance(types, list) else [types] if types else []
    if types and "null" not in types and "anyOf" not in prop:
        out.append(None)
    if types and not {"string", "object"} & set(types) and "anyOf" not in prop:
        out.append("1")  # numeric-looking strings are not numbers
    if "integer" in types:
        out += [True, 2.5]
    if "boolean" in types:
        out.append(1)
    if "enum" in prop:
        out.append(str(prop["enum"][0]).upper() + "x")
    return out


@pytest.mark.parametrize(("target", "name"), MODELS, ids=IDS)
def test_examples_valid_for_both(target: str, name: str) -> None:
    check, base = _validator(target, name), _base(target, name)
    assert check.is_valid(base) and _pydantic_ok(target, name, base), base
    for key, prop in DEFS[target][name]["properties"].items():
        for example in prop.get("examples", []):
            doc = {**base, key: example}
            assert check.is_valid(doc), (key, example)
            assert _pydantic_ok(target, name, doc), (key, example)


@pytest.mark.parametrize(("target", "name"), MODELS, ids=IDS)
def test_out_of_bounds_and_wrong_types_invalid_for_both(target: str, name: str) -> None:
    check, base = _validator(target, name), _base(target, name)
    disagreements = []
    for key, prop in DEFS[target][name]["properties"].items():
        for value in _wrong_values(prop):
            doc = {**base, key: value}
            schema_ok, model_ok = check.is_valid(doc), _pydantic_ok(target, name, doc)
            if schema_ok or model_ok:
                disagreements.append((key, value, schema_ok, model_ok))
    assert disagreements == []


@pytest.mark.parametrize(("target", "name"), MODELS, ids=IDS)
def test_unknown_key_handled_alike(target: str, name: str) -> None:
    # Local models reject unknown keys; Arena models ignore them (as the service does),
    # except the ones marked closed there too (MutationSpec).
    closed = DEFS[target][name].get("additionalProperties") is False
    assert closed == (target == "local" or name == "MutationSpec")
    doc = {**_base(target, name), "not_a_field": 1}
    assert _validator(target, name).is_valid(doc) is not closed
    assert _pydantic_ok(target, name, doc) is not closed
