"""Turn a manifest ``network`` section (spec model or dict) into a plain, complete dict.

The result has the normalised ``NetworkSpec`` shape (``latent_dim``, ``min_latent_dim``,
``max_latent_dim``, ``encoder_config`` with ``arch``, ``head_config``, ``simba``,
``random_seed``, plus ``squash_output`` for stochastic actors). Missing optional fields are
filled by validating with the generated spec classes, so the defaults have one home.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

NetworkConfig = dict[str, Any]

def default_network() -> dict[str, Any]:
    """The network of an algorithm built without any network section (programmatic use): the
    seeded MLP encoder and the schema's default head (a manifest's deferred network is
    resolved by the trainer before this point)."""
    import agilerl.models.networks as models

    return {
        "encoder_config": {"arch": "mlp", **copy.deepcopy(dict(
            models.DEFERRED_ENCODER_SEEDS["mlp"]))},
        "head_config": copy.deepcopy(models.NetworkSpec.model_fields["head_config"].default),
    }


def normalise_net_config(net_config: Any, spec_name: str = "NetworkSpec") -> NetworkConfig:
    """Validate and complete a network section.

    Supported encoders: ``mlp``; ``multiinput`` over vector observation parts, built as one
    MLP (``encoder_config.mlp_config``) over the concatenated flattened parts (the
    per-part ``latent_dim`` of a multi-input encoder does not apply to that shape). Other
    archs (``cnn``, ``lstm``, ``simba``) raise ``NotImplementedError``.
    """
    import agilerl.models.networks as models

    if net_config is None:
        raw: dict[str, Any] = default_network()
    elif hasattr(net_config, "model_dump"):
        raw = _dump_network_model(net_config)
    elif isinstance(net_config, Mapping):
        raw = copy.deepcopy(dict(net_config))
    else:
        raise TypeError(
            f"net_config must be a network spec or a mapping, not {type(net_config).__name__}"
        )

    encoder = dict(raw.get("encoder_config") or {})
    arch = raw.pop("arch", None) or encoder.get("arch") or "mlp"
    if arch not in ("mlp", "multiinput") or raw.get("simba"):
        raise NotImplementedError(
            f"network encoder arch {arch!r}{' (simba)' if raw.get('simba') else ''} is not "
            "supported yet; 'mlp' and vector-only 'multiinput' encoders are implemented"
        )
    encoder.pop("arch", None)
    spec_cls = getattr(models, spec_name, None) or models.NetworkSpec
    squash = raw.get("squash_output")
    if "squash_output" not in spec_cls.model_fields:
        raw.pop("squash_output", None)
    if arch == "multiinput":
        # Validate the section as written, then encode the flattened, concatenated
        # observation parts with one MLP built from ``mlp_config``.
        spec_cls.model_validate({**raw, "encoder_config": {"arch": "multiinput", **encoder}})
        default_mlp = {k: v for k, v in default_network()["encoder_config"].items()
                       if k != "arch"}
        encoder = dict(encoder.get("mlp_config") or default_mlp)
        encoder.pop("arch", None)
    raw["encoder_config"] = encoder
    validated = spec_cls.model_validate({**raw, "encoder_config": {"arch": "mlp", **encoder}})
    out = _dump_network_model(validated)
    out["encoder_config"]["arch"] = "mlp"
    out["squash_output"] = bool(getattr(validated, "squash_output", squash))  # None -> False
    return out


def _dump_network_model(model: Any) -> dict[str, Any]:
    data = model.model_dump(mode="json")
    encoder = getattr(model, "encoder_config", None)
    arch = getattr(encoder, "arch", None)
    if arch is not None:
        data.setdefault("encoder_config", {})["arch"] = arch
    return data


def mlp_arch(
    mlp_spec: Mapping[str, Any], in_dim: int, out_dim: int, output_activation: Any = None
) -> dict[str, Any]:
    """Architecture dict for ``EvolvableMLP`` from an ``MlpSpec``-shaped mapping."""
    return {
        "in_dim": int(in_dim),
        "out_dim": int(out_dim),
        "hidden_size": [int(h) for h in mlp_spec["hidden_size"]],
        "activation": mlp_spec["activation"],
        "output_activation": output_activation,
        "layer_norm": bool(mlp_spec["layer_norm"]),
        "init_layers": bool(mlp_spec["init_layers"]),
        "output_vanish": bool(mlp_spec["output_vanish"]),
        "min_hidden_layers": int(mlp_spec["min_hidden_layers"]),
        "max_hidden_layers": int(mlp_spec["max_hidden_layers"]),
        "min_mlp_nodes": int(mlp_spec["min_mlp_nodes"]),
        "max_mlp_nodes": int(mlp_spec["max_mlp_nodes"]),
    }
