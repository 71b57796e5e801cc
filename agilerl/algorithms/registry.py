"""Registry name (``spec.name``) -> algorithm class, and building an agent from a spec."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from agilerl.algorithms.core.base import RLAlgorithm


def _classes() -> dict[str, type[RLAlgorithm]]:
    from agilerl.algorithms.dqn import DQN
    from agilerl.algorithms.ppo import PPO

    return {cls.algo: cls for cls in (DQN, PPO)}


def algorithm_class(name: str) -> type[RLAlgorithm]:
    """The class implementing registry name ``name`` (e.g. ``"DQN"``)."""
    classes = _classes()
    try:
        return classes[name]
    except KeyError:
        raise NotImplementedError(
            f"algorithm {name!r} has no implementation yet; implemented: {sorted(classes)}"
        ) from None


#: Spec fields that are not constructor hyperparameters (runtime objects, the registry
#: name, and what build_algorithm passes explicitly).
_NOT_FORWARDED = frozenset(
    {
        "name",
        "net_config",
        "hp_config",
        "actor_network",
        "critic_network",
        "critic_networks",
        "actor_networks",
    }
)


def build_algorithm(
    spec: Any,
    observation_space: gym.Space,
    action_space: gym.Space,
    *,
    index: int = 0,
    net_config: Any = None,
    hp_config: Any = None,
    device: str | torch.device = "cpu",
    seed: int | None = None,
) -> RLAlgorithm:
    """Build the agent described by an algorithm spec object (``DQNSpec``, ``PPOSpec``...).

    ``net_config``/``hp_config`` default to the spec's own when not given.
    """
    cls = algorithm_class(str(spec.name))
    hyperparameters = {
        k: v for k, v in spec.model_dump(mode="python").items() if k not in _NOT_FORWARDED
    }
    return cls(
        observation_space,
        action_space,
        index=index,
        net_config=net_config if net_config is not None else getattr(spec, "net_config", None),
        hp_config=hp_config if hp_config is not None else getattr(spec, "hp_config", None),
        device=device,
        seed=seed,
        **hyperparameters,
    )
