"""Helpers of the codegen tests: the bundled schema and a Pydantic-only manifest check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import TypeAdapter, ValidationError

from agilerl.models import _generated as g

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "agilerl" / "schemas" / "manifest.schema.json"
ARENA_BUNDLE = REPO / "agilerl" / "schemas" / "arena-manifest.schema.json"


def bundle_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(BUNDLE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


_ENCODERS = {"mlp": g.MlpSpec, "cnn": g.CnnSpec, "lstm": g.LstmSpec, "simba": g.SimbaSpec,
             "multiinput": g.MultiInputSpec}


def _network(net: Any, entry: g.AlgorithmEntry) -> None:
    if entry.network_spec is g.FinetuningNetworkSpec:
        g.FinetuningNetworkSpec.model_validate(net)
        return
    g.RLNetworkSection.model_validate(net)
    foreign = set(net) - set(entry.network_spec.model_fields) - {"arch"}
    if foreign:  # e.g. squash_output outside a stochastic actor
        raise ValueError(f"not a field of {entry.network_spec.__name__}: {sorted(foreign)}")
    encoder = net.get("encoder_config") or {}
    arch = encoder.get("arch") or net.get("arch")  # an arch inside encoder_config wins
    if arch:  # a named arch needs a complete encoder of that kind
        _ENCODERS[arch].model_validate({**encoder, "arch": arch})


def pydantic_check(doc: Any) -> None:
    """Validate a manifest mapping with the generated models only (raises on invalid).

    Mirrors the bundle's dispatch so the two can be compared; the real loader is the
    facade's ``TrainingManifest``.
    """
    if not isinstance(doc, dict):
        raise TypeError("manifest must be a mapping")
    unknown = set(doc) - set(g.MANIFEST_KEYS) - set(g.MANIFEST_KEY_ALIASES)
    if unknown or "algorithm" not in doc or "environment" not in doc:
        raise ValueError(f"bad top-level keys: {sorted(doc)}")
    algo = TypeAdapter(g.AlgorithmSpecUnion).validate_python(doc["algorithm"])
    entry = g.REGISTRY[algo.name]
    entry.env_spec.model_validate(doc["environment"])
    if "training" in doc:
        g.TrainingSpec.model_validate(doc["training"])
    for key, cls in (("mutation", g.MutationSpec), ("replay_buffer", g.ReplayBufferSpec)):
        if doc.get(key) is not None:
            cls.model_validate(doc[key])
    for key in ("selection_strategy", "tournament_selection"):
        if doc.get(key) is not None:
            TypeAdapter(g.SelectionStrategy).validate_python(doc[key])
    if doc.get("network"):  # null and {} both mean "no network section"
        _network(doc["network"], entry)


def pydantic_valid(doc: Any) -> bool:
    try:
        pydantic_check(doc)
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError):
        return False
    return True
