"""Building an agent from its algorithm spec (``DQNSpec``, ``PPOSpec``...): the class the
registry gives the spec's name, constructed with the spec's settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.core.registry import algorithm_class
from agilerl.core.value_types import Space


def build_algorithm(
    spec: Any,  # a registered RL spec (DQNSpec...): each declares its own ``name`` field
    observation_space: Space | Mapping[str, Space],
    action_space: Space | Mapping[str, Space],
    *,
    index: int = 0,
    net_config: object = None,
    hp_config: Mapping[str, object] | None = None,
    device: str | torch.device = "cpu",
    seed: int | None = None,
) -> RLAlgorithm:
    """Build the agent described by an algorithm spec object (``DQNSpec``, ``PPOSpec``...).

    ``net_config``/``hp_config`` default to the spec's own when not given.
    """
    cls = algorithm_class(str(spec.name))
    assert issubclass(cls, RLAlgorithm)  # an RL spec names an RL algorithm (LLM members are
    # built by their own paradigm's make_population)
    # Single-agent classes take one space each, multi-agent classes (MultiAgentRLAlgorithm)
    # a mapping of them per agent: the registered class's own constructor decides.
    construct: Callable[..., RLAlgorithm] = cls
    return construct(
        observation_space,
        action_space,
        index=index,
        net_config=net_config if net_config is not None else getattr(spec, "net_config", None),
        hp_config=hp_config if hp_config is not None else getattr(spec, "hp_config", None),
        device=device,
        seed=seed,
        spec=spec,
    )
