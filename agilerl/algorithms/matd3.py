"""Multi-Agent TD3 (MATD3, Ackermann et al. 2019): MADDPG with TD3's three changes.

* **Twin centralised critics** per agent; the critic target takes the smaller of the two
  target critics: ``r_i + gamma * (1 - terminated_i) * min(Q'_i1, Q'_i2)(o', a')``.
* **Delayed actor updates**: actors (and every target network) are updated once per
  ``policy_freq`` critic updates; actors ascend the first critic.
* **Target policy smoothing**: a continuous agent's target action is
  ``clip(mu'(o') + clip(N(0, 0.2), -0.5, 0.5), -1, 1)`` (normalised units, the TD3
  paper's constants, as in :mod:`agilerl.algorithms.td3`); a discrete agent's target
  action is already a relaxed sample of its target policy (MADDPG's), which smooths it.

Everything else (actions, noise, masks, state) is MADDPG's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch

from agilerl.algorithms.core.base import NetworkInput
from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.maddpg import MADDPG
from agilerl.algorithms.td3 import NOISE_CLIP, POLICY_NOISE
from agilerl.models._generated.hyperparameter_attributes import MATD3HyperparameterAttributes


@registered
class MATD3(MATD3HyperparameterAttributes, MADDPG):
    """MATD3 over per-agent (or per-group) observation and action spaces."""

    algo = "MATD3"
    critic_roles: ClassVar[tuple[str, ...]] = ("critic_1", "critic_2")

    def _target_action(
        self, agent: str, next_obs: NetworkInput, next_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        if self.actions[agent].discrete:
            return super()._target_action(agent, next_obs, next_mask)
        output = self.unit_network("actor_target", agent)(next_obs)
        noise = torch.randn(output.shape, generator=self.torch_rng).to(output.device)
        return (output + (noise * POLICY_NOISE).clamp(-NOISE_CLIP, NOISE_CLIP)).clamp(-1.0, 1.0)

    def _next_value(self, agent: str, next_obs: Mapping[str, NetworkInput],
                    next_actions: Mapping[str, torch.Tensor]) -> torch.Tensor:
        q1 = self.unit_network("critic_1_target", agent)(next_obs, next_actions)
        q2 = self.unit_network("critic_2_target", agent)(next_obs, next_actions)
        return torch.minimum(q1, q2)
