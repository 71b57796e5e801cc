"""Twin Delayed DDPG (TD3): DDPG with twin critics, target policy smoothing and delayed
actor updates (``policy_freq``).

The critic target is ``r + gamma * (1 - terminated) * min(Q1'(s', a'), Q2'(s', a'))``
with ``a' = clip(mu'(s') + clip(N(0, 0.2), -0.5, 0.5), -1, 1)`` in normalised action
units (the smoothing constants of the TD3 paper; the schema has no fields for them).
The actor ascends ``Q1``. Everything else (action scaling, noise, shared encoders,
mutation, state) is DDPG's.
"""

from __future__ import annotations

import torch

from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.ddpg import DDPG
from agilerl.models._generated.hyperparameter_attributes import TD3HyperparameterAttributes

#: Standard deviation and clip of the target policy smoothing noise (normalised units).
POLICY_NOISE = 0.2
NOISE_CLIP = 0.5


@registered
class TD3(TD3HyperparameterAttributes, DDPG):
    """TD3 for bounded continuous action spaces."""

    algo = "TD3"
    critic_names = ("critic_1", "critic_2")
    # The twin critics keep one architecture: a mutation of critic_1 is applied to critic_2.
    mirrored_networks = {
        "actor_target": "actor",
        "critic_1_target": "critic_1",
        "critic_2": "critic_1",
        "critic_2_target": "critic_1",
    }

    def _smooth_target_action(self, action: torch.Tensor) -> torch.Tensor:
        noise = torch.randn(action.shape, generator=self.torch_rng).to(action.device)
        noise = (noise * POLICY_NOISE).clamp(-NOISE_CLIP, NOISE_CLIP)
        return (action + noise).clamp(-1.0, 1.0)

    def _next_value(self, q_next: list[torch.Tensor]) -> torch.Tensor:
        return torch.minimum(q_next[0], q_next[1])
