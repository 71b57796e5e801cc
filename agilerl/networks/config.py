"""Turn a manifest ``network`` section (spec model or dict) into a plain, complete dict.

The result has the normalised ``NetworkSpec`` shape (``latent_dim``, ``min_latent_dim``,
``max_latent_dim``, ``encoder_config`` with ``arch``, ``head_config``, ``simba``,
``random_seed``, plus ``squash_output`` for stochastic actors). Missing optional fields are
filled by validating with the generated spec classes, so the defaults have one home.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypedDict, cast

from agilerl.modules.encoder import EncoderConfig

if TYPE_CHECKING:
    from agilerl.modules.mlp import MLPArchitecture


class NetworkConfig(TypedDict, total=False):
    """A normalised network section (module docstring): a ``NetworkSpec`` (or a subclass's
    spec) dumped to JSON, with the encoder's ``arch`` and ``squash_output`` filled."""

    latent_dim: int
    min_latent_dim: int
    max_latent_dim: int
    encoder_config: EncoderConfig
    head_config: EncoderConfig
    random_seed: int | None
    simba: bool | None
    squash_output: bool


class _SpecModel(Protocol):
    """A validated spec model (pydantic), as far as this module reads it."""

    def model_dump(self, *, mode: str) -> dict[str, object]: ...


def default_network() -> NetworkConfig:
    """The network of an algorithm built without any network section (programmatic use): the
    seeded MLP encoder and the schema's default head (a manifest's deferred network is
    resolved by the trainer before this point)."""
    import agilerl.models.networks as models

    return {
        "encoder_config": cast(EncoderConfig, {"arch": "mlp", **copy.deepcopy(dict(
            models.DEFERRED_ENCODER_SEEDS["mlp"]))}),
        "head_config": copy.deepcopy(models.NetworkSpec.model_fields["head_config"].default),
    }


def normalise_net_config(net_config: object, spec_name: str = "NetworkSpec") -> NetworkConfig:
    """Validate and complete a network section.

    The encoder keeps its ``arch`` (``encoder_config.arch``; a top-level ``arch`` is moved
    there); the encoder factory (``agilerl.modules.encoders``) builds it, and says so
    when this version has no encoder for it. A ``multiinput`` encoder's ``mlp_config``
    (the MLP over the concatenated per-part outputs) is filled with the default MLP when
    left out.
    """
    import agilerl.models.networks as models

    if net_config is None:
        raw: dict[str, object] = dict(default_network())
    elif hasattr(net_config, "model_dump"):
        raw = dict(_dump_network_model(net_config))
    elif isinstance(net_config, Mapping):
        raw = copy.deepcopy(dict(net_config))
    else:
        raise TypeError(
            f"net_config must be a network spec or a mapping, not {type(net_config).__name__}"
        )

    # the encoder section, a mapping (the spec's validation below refuses anything else)
    encoder = dict(cast("Mapping[str, object]", raw.get("encoder_config") or {}))
    # ``simba: true`` with no arch named means a SimBa encoder (its config is SimbaSpec-shaped)
    arch = raw.pop("arch", None) or encoder.get("arch") or ("simba" if raw.get("simba") else "mlp")
    encoder["arch"] = arch
    if arch == "multiinput" and not encoder.get("mlp_config"):
        encoder["mlp_config"] = {k: v for k, v in default_network()["encoder_config"].items()
                                 if k != "arch"}
    spec_cls = getattr(models, spec_name, None) or models.NetworkSpec
    squash = raw.get("squash_output")
    if "squash_output" not in spec_cls.model_fields:
        raw.pop("squash_output", None)
    validated = spec_cls.model_validate({**raw, "encoder_config": encoder})
    out = _dump_network_model(validated)
    out["encoder_config"]["arch"] = cast(str, arch)  # the spec validated it
    out["squash_output"] = bool(getattr(validated, "squash_output", squash))  # None -> False
    return out


def _dump_network_model(model: _SpecModel) -> NetworkConfig:
    data = cast(NetworkConfig, model.model_dump(mode="json"))
    encoder = getattr(model, "encoder_config", None)
    arch = getattr(encoder, "arch", None)
    if arch is not None:
        data.setdefault("encoder_config", {})["arch"] = arch
    return data


def mlp_arch(
    mlp_spec: EncoderConfig, in_dim: int, out_dim: int, output_activation: str | None = None
) -> MLPArchitecture:
    """Architecture dict for ``EvolvableMLP`` from an ``MlpSpec``-shaped mapping."""
    from agilerl.modules.mlp import mlp_architecture

    return mlp_architecture(mlp_spec, in_dim, out_dim, output_activation)
