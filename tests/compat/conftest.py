"""A tiny DQN manifest for the compatibility tests (a run takes about a second)."""

from __future__ import annotations

import copy
from typing import Any

TINY: dict[str, Any] = {
    "algorithm": {"name": "DQN", "batch_size": 32, "learn_step": 4},
    "environment": {"name": "CartPole-v1", "num_envs": 2},
    "network": {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
                "head_config": {"hidden_size": [16]}},
    "replay_buffer": {"max_size": 2000},
    "training": {"max_steps": 600, "evo_steps": 200, "pop_size": 2, "eval_steps": 50},
}


def tiny(**sections: Any) -> dict[str, Any]:
    """A deep copy of :data:`TINY`; keyword sections replace or (``training``) update it."""
    data = copy.deepcopy(TINY)
    for key, value in sections.items():
        if key == "training":
            data["training"].update(value)
        elif value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data
