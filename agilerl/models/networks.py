"""Network spec classes (fields from ``schemas/sections/network.schema.json``) with the
min/max/length rules a schema cannot state (spec §3.4, X9), and the normalisation of a
manifest's ``network`` section (§3.4: top-level ``arch`` moves into ``encoder_config``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationInfo, model_validator

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import raise_first, skip_rules
from agilerl.models.rules import (
    cnn_rules,
    lstm_rules,
    mlp_rules,
    multi_input_rules,
    network_rules,
    simba_rules,
)

FinetuningNetworkSpec = gen.FinetuningNetworkSpec
LoraConfigDict = gen.LoraConfigDict
RLNetworkSection = gen.RLNetworkSection


@public
class MlpSpec(gen.MlpSpec):
    """MLP encoder/head settings (``arch: mlp``)."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> MlpSpec:
        if not skip_rules(info):
            raise_first(mlp_rules(self))
        return self


@public
class CnnSpec(gen.CnnSpec):
    """CNN encoder settings (``arch: cnn``)."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> CnnSpec:
        if not skip_rules(info):
            raise_first(cnn_rules(self))
        return self


@public
class LstmSpec(gen.LstmSpec):
    """LSTM encoder settings (``arch: lstm``)."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> LstmSpec:
        if not skip_rules(info):
            raise_first(lstm_rules(self))
        return self


@public
class SimbaSpec(gen.SimbaSpec):
    """SimBa residual encoder settings (``arch: simba``)."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> SimbaSpec:
        if not skip_rules(info):
            raise_first(simba_rules(self))
        return self


@public
class MultiInputSpec(gen.MultiInputSpec):
    """Encoder for Dict/Tuple observations (``arch: multiinput``)."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> MultiInputSpec:
        if not skip_rules(info):
            raise_first(multi_input_rules(self))
        return self


ENCODER_SPECS: dict[str, type[Any]] = {
    "mlp": MlpSpec,
    "cnn": CnnSpec,
    "lstm": LstmSpec,
    "simba": SimbaSpec,
    "multiinput": MultiInputSpec,
}
"""``arch`` value → encoder spec class."""

_PUBLIC_OF = {gen_cls: pub for gen_cls, pub in (
    (gen.MlpSpec, MlpSpec), (gen.CnnSpec, CnnSpec), (gen.LstmSpec, LstmSpec),
    (gen.SimbaSpec, SimbaSpec), (gen.MultiInputSpec, MultiInputSpec))}


def _adopt(value: Any) -> Any:
    """Re-class a nested generated encoder/head object as its public class (same data)."""
    public = _PUBLIC_OF.get(type(value))
    if public is None:
        return value
    fields = {name: _adopt(getattr(value, name)) for name in type(value).model_fields}
    return public.model_construct(_fields_set=set(value.model_fields_set), **fields)


@public
class NetworkSpec(gen.NetworkSpec):
    """An evolvable RL network: encoder + head + latent size (base of every network class)."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> NetworkSpec:
        if isinstance(self.encoder_config, gen.SimbaSpec):
            self.simba = True
        self.encoder_config = _adopt(self.encoder_config)
        self.head_config = _adopt(self.head_config)
        if not skip_rules(info):
            raise_first(network_rules(self))
        return self

    @property
    def arch(self) -> str:
        """The encoder's architecture (``mlp``, ``cnn``, ...)."""
        return str(self.encoder_config.arch)

    def to_section(self) -> dict[str, Any]:
        """JSON form as a manifest ``network`` section (``encoder_config.arch`` included)."""
        data = self.model_dump(mode="json")
        data.setdefault("encoder_config", {})["arch"] = self.arch
        if isinstance(data.get("head_config"), dict):
            data["head_config"].pop("arch", None)
        return data


@public
class QNetworkSpec(gen.QNetworkSpec, NetworkSpec):
    """Q-network (DQN, CQN, bandits)."""


@public
class RainbowQNetworkSpec(gen.RainbowQNetworkSpec, NetworkSpec):
    """Distributional noisy Q-network (RainbowDQN)."""


@public
class ContinuousQNetworkSpec(gen.ContinuousQNetworkSpec, NetworkSpec):
    """Critic Q(s, a) for continuous actions."""


@public
class DeterministicActorSpec(gen.DeterministicActorSpec, NetworkSpec):
    """Deterministic actor (DDPG, TD3, MADDPG, MATD3)."""


@public
class StochasticActorSpec(gen.StochasticActorSpec, NetworkSpec):
    """Stochastic actor (PPO, IPPO)."""


@public
class ValueNetworkSpec(gen.ValueNetworkSpec, NetworkSpec):
    """State-value network (PPO critics)."""


NETWORK_SPECS: dict[str, type[Any]] = {cls.__name__: cls for cls in (
    NetworkSpec, QNetworkSpec, RainbowQNetworkSpec, ContinuousQNetworkSpec,
    DeterministicActorSpec, StochasticActorSpec, ValueNetworkSpec)}
NETWORK_SPECS["FinetuningNetworkSpec"] = FinetuningNetworkSpec
"""Class name → public network spec class (the registry names the class per algorithm)."""


def network_arch(section: Any) -> str | None:
    """The ``arch`` a network section names (top level or ``encoder_config``), or None."""
    if not isinstance(section, Mapping):
        return None
    encoder = section.get("encoder_config")
    arch = encoder.get("arch") if isinstance(encoder, Mapping) else None
    return arch or section.get("arch")


def network_arch_is_resolvable(section: Any) -> bool:
    """True when the architecture is known without looking at the environment."""
    return network_arch(section) is not None


def normalise_network(section: Any) -> Any:
    """Move a top-level ``arch`` into ``encoder_config.arch`` (an ``arch`` already inside
    ``encoder_config`` wins). Non-mappings and sections without ``arch`` are returned as is."""
    if not isinstance(section, Mapping) or "arch" not in section:
        return section
    data = copy.deepcopy(dict(section))
    arch = data.pop("arch")
    encoder = data.get("encoder_config")
    encoder = dict(encoder) if isinstance(encoder, Mapping) else {}
    encoder.setdefault("arch", arch)
    data["encoder_config"] = encoder
    return data


def is_finetuning_network(section: Any) -> bool:
    """An LLM network section (it names a pretrained model)."""
    return isinstance(section, Mapping) and "pretrained_model_name_or_path" in section


__all__ = [
    "ContinuousQNetworkSpec", "CnnSpec", "DeterministicActorSpec", "ENCODER_SPECS",
    "FinetuningNetworkSpec", "LoraConfigDict", "LstmSpec", "MlpSpec", "MultiInputSpec",
    "NETWORK_SPECS", "NetworkSpec", "QNetworkSpec", "RainbowQNetworkSpec", "SimbaSpec",
    "StochasticActorSpec", "ValueNetworkSpec", "is_finetuning_network", "network_arch",
    "network_arch_is_resolvable", "normalise_network",
]
