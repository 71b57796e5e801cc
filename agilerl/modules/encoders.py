"""The encoder factory: manifest ``arch`` -> evolvable encoder class.

Every network (Q-networks, actor-critics, deterministic actors, continuous Q-networks)
builds its encoders here (and the multi-input encoder its part encoders), so any encoder
works under any head. An encoder class lives in its own module of ``agilerl.modules`` and
implements :class:`agilerl.modules.encoder.EvolvableEncoder`; the table below says where.
The table is the one place that knows which archs exist: an arch whose module is absent is
reported as not implemented.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from agilerl.modules.encoder import EncoderArchitecture, EvolvableEncoder

if TYPE_CHECKING:
    from agilerl.core.value_types import Space
    from agilerl.networks.config import NetworkConfig

#: Manifest ``encoder_config.arch`` -> ``"module:Class"`` of its encoder.
ENCODER_CLASSES: dict[str, str] = {
    "mlp": "agilerl.modules.mlp:MLPEncoder",
    "cnn": "agilerl.modules.cnn:EvolvableCNN",
    "multiinput": "agilerl.modules.multi_input:MultiInputEncoder",
    "simba": "agilerl.modules.simba:SimbaEncoder",
    "lstm": "agilerl.modules.lstm:LSTMEncoder",
}


def encoder_class(kind: str) -> type[EvolvableEncoder]:
    """The encoder class of ``kind`` (a manifest ``arch``); ``NotImplementedError`` when
    this version has none."""
    target = ENCODER_CLASSES.get(kind)
    if target is None:
        raise NotImplementedError(
            f"network encoder arch {kind!r} is not supported; known: {', '.join(ENCODER_CLASSES)}"
        )
    module_name, class_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise NotImplementedError(
            f"network encoder arch {kind!r} is not supported yet in this version"
        ) from None
    return getattr(module, class_name)  # type: ignore[no-any-return]


def encoder_kind(net_config: NetworkConfig) -> str:
    """The encoder arch a normalised ``net_config`` asks for (``simba: true`` turns an
    ``mlp`` encoder into ``simba``)."""
    kind = str(net_config["encoder_config"].get("arch") or "mlp")
    if kind == "mlp" and net_config.get("simba"):
        return "simba"
    return kind


def encoder_architecture(
    net_config: NetworkConfig, observation_space: Space | int
) -> EncoderArchitecture:
    """Architecture dict of the encoder ``net_config`` describes over ``observation_space``
    (a Gymnasium space, or an int for a flat vector of that width), output width
    ``net_config["latent_dim"]``."""
    cls = encoder_class(encoder_kind(net_config))
    return cls.architecture_from_config(
        net_config["encoder_config"], observation_space, int(net_config["latent_dim"])
    )


def encoder_from_architecture(
    arch: Mapping[str, object], generator: torch.Generator | None = None
) -> EvolvableEncoder:
    """Build an encoder from its ``architecture()`` (no ``kind``: an MLP, as saved by
    versions before encoders were pluggable)."""
    return encoder_class(str(arch.get("kind", "mlp")))(arch, generator)  # type: ignore[call-arg]
