"""Q-network for discrete actions: observation -> one value per action."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from agilerl.modules.encoder import EncoderInput
from agilerl.modules.encoders import encoder_architecture
from agilerl.networks.base import EvolvableNetwork, NetworkArchitecture
from agilerl.networks.config import NetworkConfig, mlp_arch

if TYPE_CHECKING:
    from agilerl.core.value_types import Space


class QNetwork(EvolvableNetwork):
    """Encoder (any arch) + MLP head producing ``num_actions`` Q-values."""

    @classmethod
    def build(
        cls,
        observation_space: Space | int,
        num_actions: int,
        net_config: NetworkConfig,
        generator: torch.Generator,
    ) -> QNetwork:
        """``observation_space``: a Gymnasium space (or an int: a flat vector's width)."""
        head, latent = net_config["head_config"], net_config["latent_dim"]
        arch: NetworkArchitecture = {
            "encoders": {"encoder": encoder_architecture(net_config, observation_space)},
            "heads": {"q": mlp_arch(head, latent, num_actions, head.get("output_activation"))},
            "head_inputs": {"q": "encoder"},
            "latent": {"min": net_config["min_latent_dim"], "max": net_config["max_latent_dim"]},
            "extra": {},
        }
        return cls(arch, generator)

    def forward(self, obs: EncoderInput) -> torch.Tensor:
        # The MLPs' forward is called directly: no hooks are used on these submodules,
        # and skipping ``Module.__call__`` saves its dispatch on every env step and update.
        return self.head("q").forward(self.encoder("encoder").forward(obs))
