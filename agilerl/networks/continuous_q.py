"""State-action value network (critics of DDPG, TD3): ``Q(s, a)`` for continuous actions.

The encoder reads the observation; the head reads ``[a, latent]`` (action first, so a
latent-width mutation adds or drops the *last* input columns of the head, exactly the
units the encoder gains or loses). Actions are the policy's normalised actions in [-1, 1].
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from agilerl.modules.encoder import MutationPlan
from agilerl.modules.encoders import encoder_architecture
from agilerl.networks.base import EvolvableNetwork, NetworkArchitecture
from agilerl.networks.config import NetworkConfig, mlp_arch

if TYPE_CHECKING:
    from agilerl.core.value_types import Space


class ContinuousQNetwork(EvolvableNetwork):
    """Encoder (any arch) + MLP head ``q`` over ``[action, latent]``, one value per pair."""

    @classmethod
    def build(
        cls,
        observation_space: Space | int,
        action_dim: int,
        net_config: NetworkConfig,
        generator: torch.Generator,
    ) -> ContinuousQNetwork:
        """``observation_space``: a Gymnasium space (or an int: a flat vector's width)."""
        head, latent = net_config["head_config"], net_config["latent_dim"]
        # A value is unbounded: the head's output activation (meant for the actor) is not used.
        arch: NetworkArchitecture = {
            "encoders": {"encoder": encoder_architecture(net_config, observation_space)},
            "heads": {"q": mlp_arch(head, action_dim + latent, 1, None)},
            "head_inputs": {"q": "encoder"},
            "latent": {"min": net_config["min_latent_dim"], "max": net_config["max_latent_dim"]},
            "extra": {"action_dim": int(action_dim)},
        }
        return cls(arch, generator)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        latent = self.encoder("encoder").forward(obs)
        return self.head("q").forward(torch.cat([action, latent], dim=-1)).squeeze(-1)

    def _resize_latent(self, encoder: str, plan: MutationPlan) -> None:
        width = self.encoder(encoder).out_dim
        delta = int(plan["nodes"]) if plan["op"] == "add_nodes" else -int(plan["nodes"])
        bounds = self.arch["latent"]
        new_width = max(bounds["min"], min(bounds["max"], width + delta))
        seed = int(plan["seed"])
        self.encoders[encoder] = self.encoder(encoder).resized(out_dim=new_width, seed=seed)
        head_in = self.arch["extra"]["action_dim"] + new_width
        self.heads["q"] = self.head("q").resized(in_dim=head_in, seed=seed + 1)
