"""Deferred network resolution (spec §5.3): a manifest ``network`` without an ``arch``.

The encoder architecture is inferred from the observation space, in this priority:
Dict/Tuple space -> ``multiinput``; Box with a 3-D shape -> ``cnn``; ``network.simba`` ->
``simba``; algorithm ``recurrent`` -> ``lstm``; otherwise ``mlp``. Only the fields each
encoder requires are seeded (``agilerl.models.DEFERRED_ENCODER_SEEDS``, shared with the
manifest checker); the user's ``encoder_config`` keys overlay the seed and
every optional field takes its default from the network spec class when the algorithm
validates its ``net_config``. A ``net_config`` that already names an arch is left untouched.

:func:`resolve_network_spec` goes one step further, as the trainer does: the resolved
section becomes the algorithm's network spec object (``head_config`` and the other omitted
fields take their schema defaults), which is what ``algorithm_spec.net_config`` holds once
a trainer is built.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel

from agilerl.core.value_types import Space
from agilerl.models.networks import (
    DEFERRED_ENCODER_SEEDS,
    NETWORK_SPECS,
    infer_encoder_arch,
    normalise_network,
    with_default_encoder,
)

_Section = TypeVar("_Section")
"""A ``network`` section as given: None, a mapping, or a network spec object."""


def _has_arch(net_config: Mapping[str, object]) -> bool:
    encoder = net_config.get("encoder_config")
    return bool(net_config.get("arch")) or (
        isinstance(encoder, Mapping) and bool(encoder.get("arch"))
    )


def resolve_net_config(
    net_config: _Section, observation_space: Space, *, recurrent: bool = False
) -> _Section | dict[str, object]:
    """Return ``net_config`` with its encoder arch resolved (unchanged if already set).

    ``None`` stays ``None`` (the algorithm's built-in default network); a spec object (an
    eager network validated by the manifest) is returned as is.
    """
    if net_config is None or not isinstance(net_config, Mapping) or _has_arch(net_config):
        return net_config
    resolved = copy.deepcopy(dict(net_config))
    arch = infer_encoder_arch(
        observation_space, simba=bool(resolved.get("simba")), recurrent=recurrent
    )
    user_encoder = dict(resolved.get("encoder_config") or {})
    resolved["encoder_config"] = {**copy.deepcopy(DEFERRED_ENCODER_SEEDS[arch]), **user_encoder,
                                  "arch": arch}
    return resolved


def resolve_network_spec(
    net_config: _Section, observation_space: Space, spec_class: type[BaseModel] | None = None,
    *, recurrent: bool = False,
) -> _Section | BaseModel:
    """``net_config`` as a network spec object of ``spec_class`` (default ``NetworkSpec``),
    its encoder arch resolved for ``observation_space``.

    ``None`` and spec objects are returned as they are; a mapping (a deferred or partial
    network section) is resolved, then validated, so omitted fields take their defaults.
    Keys the spec class does not have (``squash_output`` of a non-actor network) are
    dropped, as the manifest checker does.
    """
    if net_config is None or not isinstance(net_config, Mapping):
        return net_config
    cls = spec_class or NETWORK_SPECS["NetworkSpec"]
    section = normalise_network(with_default_encoder(
        resolve_net_config(net_config, observation_space, recurrent=recurrent)))
    return cls.model_validate({k: v for k, v in section.items() if k in cls.model_fields})
