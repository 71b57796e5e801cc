"""Deterministic policy network (DDPG, TD3): observation -> normalised action in [-1, 1].

The head's output activation bounds the action: ``Tanh`` (the default when the head
config sets none) gives [-1, 1] directly, ``Sigmoid`` gives [0, 1], mapped to [-1, 1].
The algorithm maps the normalised action to the environment's bounds, so the same network
serves Pendulum's [-2, 2] and LunarLanderContinuous' [-1, 1]. With ``logits=True`` the head
has no output activation: one unbounded logit per discrete action (MADDPG and MATD3 on
discrete action spaces).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from agilerl.modules.encoder import EncoderInput
from agilerl.modules.encoders import encoder_architecture
from agilerl.networks.base import EvolvableNetwork, NetworkArchitecture
from agilerl.networks.config import NetworkConfig, mlp_arch

if TYPE_CHECKING:
    from agilerl.core.value_types import Space

#: Head output activations that bound the action, and whether they need ``2x - 1``.
BOUNDED_OUTPUTS = {"Tanh": False, "Sigmoid": True}


class DeterministicActor(EvolvableNetwork):
    """Encoder (any arch) + MLP head ``policy`` producing one normalised action per observation."""

    @classmethod
    def build(
        cls,
        observation_space: Space | int,
        action_dim: int,
        net_config: NetworkConfig,
        generator: torch.Generator,
        *,
        logits: bool = False,
    ) -> DeterministicActor:
        """``observation_space``: a Gymnasium space (or an int: a flat vector's width);
        ``logits``: unbounded outputs (the head config's output activation is not used)."""
        head, latent = net_config["head_config"], net_config["latent_dim"]
        output = None if logits else head.get("output_activation") or "Tanh"
        if output is not None and output not in BOUNDED_OUTPUTS:
            raise ValueError(
                f"network.head_config.output_activation {output!r} does not bound a "
                f"deterministic policy's action; use one of {sorted(BOUNDED_OUTPUTS)} (or "
                "leave it out for Tanh)"
            )
        arch: NetworkArchitecture = {
            "encoders": {"encoder": encoder_architecture(net_config, observation_space)},
            "heads": {"policy": mlp_arch(head, latent, action_dim, output)},
            "head_inputs": {"policy": "encoder"},
            "latent": {"min": net_config["min_latent_dim"], "max": net_config["max_latent_dim"]},
            "extra": {"affine": output is not None and BOUNDED_OUTPUTS[output]},
        }
        return cls(arch, generator)

    def forward(self, obs: EncoderInput) -> torch.Tensor:
        out = self.head("policy").forward(self.encoder("encoder").forward(obs))
        return out * 2.0 - 1.0 if self.arch["extra"]["affine"] else out
