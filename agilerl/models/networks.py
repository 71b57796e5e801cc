"""Network spec classes (fields from ``schemas/sections/network.schema.json``) with the
min/max/length rules a schema cannot state (spec §3.4, X9), and the normalisation of a
manifest's ``network`` section (§3.4: top-level ``arch`` moves into ``encoder_config``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Container, Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar, overload, runtime_checkable

from pydantic import BaseModel, ValidationInfo, model_validator

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import raise_first, skip_rules
from agilerl.models.rules import encoder_rules, network_rules

FinetuningNetworkSpec = gen.FinetuningNetworkSpec
LoraConfigDict = gen.LoraConfigDict


@runtime_checkable
class _PeftLoraLike(Protocol):
    """What is read of a PEFT ``LoraConfig``."""

    r: int
    lora_alpha: int
    target_modules: object


#: PEFT ``LoraConfig`` attribute -> manifest LoRA key.
_PEFT_LORA_KEYS = {"r": "lora_r", "lora_alpha": "lora_alpha", "target_modules": "target_modules",
                   "target_parameters": "target_parameters", "task_type": "task_type",
                   "lora_dropout": "lora_dropout"}


def lora_settings(lora: object) -> dict[str, object]:
    """A PEFT ``LoraConfig``'s (or a like object's) settings as manifest LoRA keys.

    Sets (PEFT stores target modules as one) become sorted lists, no target modules means
    ``all-linear``, and an enum task type its value. An attribute the object lacks is left
    out, so validation fills the schema's default.
    """
    settings: dict[str, object] = {}
    for attribute, key in _PEFT_LORA_KEYS.items():
        if hasattr(lora, attribute):
            value = getattr(lora, attribute)
            settings[key] = sorted(value) if isinstance(value, (set, frozenset)) else value
    if "target_modules" in settings and settings["target_modules"] is None:
        settings["target_modules"] = "all-linear"
    task_type = settings.get("task_type")
    if task_type is None:
        settings.pop("task_type", None)
    else:
        settings["task_type"] = str(getattr(task_type, "value", task_type))
    return settings


def lora_settings_of(value: object) -> object:
    """``FinetuningNetworkSpec``'s input converter: a PEFT ``LoraConfig`` (or any object
    with its attributes) becomes manifest LoRA keys (:func:`lora_settings`), as users of the
    reference library pass one; dicts, ``LoraConfigDict`` and ``None`` pass through."""
    if value is None or isinstance(value, (Mapping, LoraConfigDict)):
        return value
    if not isinstance(value, _PeftLoraLike):
        return value  # validation reports the wrong type
    return lora_settings(value)


def _listed(modules: object) -> object:
    """A set of module names (PEFT stores them so) as a sorted list."""
    return sorted(modules) if isinstance(modules, (set, frozenset)) else modules


FinetuningNetworkSpec._input_converters = {"lora_config": lora_settings_of}
LoraConfigDict._input_converters = {"target_modules": _listed}
RLNetworkSection = gen.RLNetworkSection

if TYPE_CHECKING:
    from typing import Self  # Python 3.11

    from agilerl.core.value_types import Space

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class _EncoderRules:
    """Checks an encoder's cross-field rules (``rules.ENCODER_RULES`` by its ``arch`` tag)
    after validation, unless the validation context asks to skip them.

    ``model_dump()`` of an encoder leaves out its ``arch`` tag, as the reference's does (the
    dump is the encoder's keyword arguments); a network's dump keeps every encoder's tag.
    """

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> Self:
        if not skip_rules(info):
            raise_first(encoder_rules(getattr(self, "arch", None), self))
        return self

    def model_dump(self, **kwargs: object) -> dict[str, object]:
        data: dict[str, object] = super().model_dump(**kwargs)  # type: ignore[misc]
        if not _asked_for(kwargs, "arch"):
            data.pop("arch", None)
        return data


def _asked_for(kwargs: Mapping[str, object], name: str) -> bool:
    """Whether a ``model_dump(include=...)`` call names ``name`` explicitly (called after
    ``model_dump`` accepted ``include``: a set or a mapping)."""
    include = kwargs.get("include")
    return include is not None and isinstance(include, Container) and name in include


@public
class MlpSpec(_EncoderRules, gen.MlpSpec):
    """MLP encoder/head settings (``arch: mlp``).

    ``model_dump()`` also leaves out ``output_activation`` when it is None (as the
    reference does), so the dump can be passed on as keyword arguments unchanged.
    """

    def model_dump(self, **kwargs: object) -> dict[str, object]:
        data = super().model_dump(**kwargs)
        if data.get("output_activation", "") is None and not _asked_for(kwargs,
                                                                         "output_activation"):
            del data["output_activation"]
        return data


@public
class CnnSpec(_EncoderRules, gen.CnnSpec):
    """CNN encoder settings (``arch: cnn``)."""


@public
class LstmSpec(_EncoderRules, gen.LstmSpec):
    """LSTM encoder settings (``arch: lstm``)."""


@public
class SimbaSpec(_EncoderRules, gen.SimbaSpec):
    """SimBa residual encoder settings (``arch: simba``)."""


@public
class MultiInputSpec(_EncoderRules, gen.MultiInputSpec):
    """Encoder for Dict/Tuple observations (``arch: multiinput``)."""


EncoderSpecModel: TypeAlias = MlpSpec | CnnSpec | LstmSpec | SimbaSpec | MultiInputSpec
"""A public encoder spec model."""

ENCODER_SPECS: dict[str, type[EncoderSpecModel]] = {
    "mlp": MlpSpec,
    "cnn": CnnSpec,
    "lstm": LstmSpec,
    "simba": SimbaSpec,
    "multiinput": MultiInputSpec,
}
"""``arch`` value → encoder spec class."""

DEFERRED_ENCODER_SEEDS: Mapping[str, Mapping[str, object]] = gen.DEFERRED_ENCODER_SEEDS
"""Inferred ``arch`` → the required encoder fields seeded for a network without an ``arch``
(spec §5.3). The manifest checker seeds them to check what the user wrote; the trainer seeds
the encoder it builds. The user's ``encoder_config`` keys overlay them; optional fields take
their schema defaults. Read-only: copy before changing. Written in ``schemas/`` as each
encoder's ``x-deferred-seed``."""

#: Generated encoder class → its public subclass (the generated class is the public one's
#: last base).
_PUBLIC_OF: dict[type, type[EncoderSpecModel]] = {
    pub.__bases__[-1]: pub for pub in ENCODER_SPECS.values()}


@overload
def _adopt(value: M) -> M: ...


@overload
def _adopt(value: object) -> object: ...


def _adopt(value: object) -> object:
    """Re-class a nested generated encoder/head object as its public class (same data)."""
    public = _PUBLIC_OF.get(type(value))
    if public is None:
        return value
    assert isinstance(value, BaseModel)  # a generated encoder class is a key of _PUBLIC_OF
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

    def to_section(self) -> dict[str, object]:
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


NetworkSpecModel: TypeAlias = NetworkSpec | FinetuningNetworkSpec
"""A public network spec model: an RL network or an LLM's pretrained model."""

NETWORK_SPECS: dict[str, type[NetworkSpecModel]] = {cls.__name__: cls for cls in (
    NetworkSpec, QNetworkSpec, RainbowQNetworkSpec, ContinuousQNetworkSpec,
    DeterministicActorSpec, StochasticActorSpec, ValueNetworkSpec)}
NETWORK_SPECS["FinetuningNetworkSpec"] = FinetuningNetworkSpec
"""Class name → public network spec class (the registry names the class per algorithm)."""


def encoder_spec_for_arch(arch: str) -> type[EncoderSpecModel]:
    """The encoder spec class of an ``arch`` (``"mlp"`` -> :class:`MlpSpec`, ...)."""
    try:
        return ENCODER_SPECS[arch]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown encoder arch: {arch!r}; known: "
                         f"{', '.join(ENCODER_SPECS)}") from None


def infer_encoder_arch(observation_space: Space, *, simba: bool = False,
                       recurrent: bool = False) -> str:
    """The encoder arch for an observation space: Dict/Tuple -> ``multiinput``; a 3-D Box
    -> ``cnn``; then ``simba``, then ``recurrent`` -> ``lstm``; otherwise ``mlp`` (the space
    beats the flags; simba beats recurrent). Imports gymnasium on call."""
    from gymnasium import spaces

    if isinstance(observation_space, spaces.Dict | spaces.Tuple):
        return "multiinput"
    if isinstance(observation_space, spaces.Box) and len(observation_space.shape) == 3:
        return "cnn"
    if simba:
        return "simba"
    if recurrent:
        return "lstm"
    return "mlp"


def min_max_validator(min_field: str, max_field: str) -> Callable[[T], T]:
    """A check ``model -> model`` raising ``ValueError`` when ``min_field`` exceeds
    ``max_field`` on the model (as the reference's helper of that name)."""

    def check(model: T) -> T:
        low, high = getattr(model, min_field), getattr(model, max_field)
        if low is not None and high is not None and low > high:
            raise ValueError(f"{min_field} ({low}) must be less than or equal to "
                             f"{max_field} ({high})")
        return model

    return check


def network_arch(section: object) -> str | None:
    """The ``arch`` a network section names (top level or ``encoder_config``), or None."""
    if not isinstance(section, Mapping):
        return None
    encoder = section.get("encoder_config")
    arch = encoder.get("arch") if isinstance(encoder, Mapping) else None
    return arch or section.get("arch")


def network_arch_is_resolvable(section: object) -> bool:
    """True when the architecture is known without looking at the environment."""
    return network_arch(section) is not None


@overload
def normalise_network(section: Mapping[str, object]) -> Mapping[str, object]: ...


@overload
def normalise_network(section: T) -> T: ...


def normalise_network(section: object) -> object:
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


@overload
def with_default_encoder(section: Mapping[str, object]) -> Mapping[str, object]: ...


@overload
def with_default_encoder(section: T) -> T: ...


def with_default_encoder(section: object) -> object:
    """A section naming a top-level ``arch`` but no ``encoder_config`` gets that arch's
    default encoder (its :data:`DEFERRED_ENCODER_SEEDS`, as when the arch is inferred).
    Anything else is returned as is."""
    if not isinstance(section, Mapping) or section.get("encoder_config") is not None:
        return section
    arch = section.get("arch")
    if not isinstance(arch, str) or arch not in DEFERRED_ENCODER_SEEDS:
        return section
    return {**section, "encoder_config": copy.deepcopy(dict(DEFERRED_ENCODER_SEEDS[arch]))}


normalize_manifest_network = normalise_network
"""The reference's spelling of :func:`normalise_network`."""


def is_finetuning_network(section: object) -> bool:
    """An LLM network section (it names a pretrained model)."""
    return isinstance(section, Mapping) and "pretrained_model_name_or_path" in section


__all__ = [
    "ContinuousQNetworkSpec", "CnnSpec", "DeterministicActorSpec", "ENCODER_SPECS",
    "FinetuningNetworkSpec", "LoraConfigDict", "LstmSpec", "MlpSpec", "MultiInputSpec",
    "NETWORK_SPECS", "NetworkSpec", "QNetworkSpec", "RainbowQNetworkSpec", "SimbaSpec",
    "StochasticActorSpec", "ValueNetworkSpec", "is_finetuning_network", "network_arch",
    "encoder_spec_for_arch", "infer_encoder_arch", "min_max_validator",
    "network_arch_is_resolvable", "normalise_network", "normalize_manifest_network",
    "with_default_encoder",
]
