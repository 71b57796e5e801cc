"""Rainbow Q-network: observation -> a return distribution per action (C51).

An encoder (any arch of the encoder factory) feeds two noisy MLP heads (:class:`~agilerl.modules.noisy_mlp.NoisyMLP`):
``value`` (``num_atoms`` logits) and ``advantage`` (``num_actions * num_atoms`` logits),
combined as dueling streams ``V + A - mean_a A`` per atom, then a softmax over the atoms
of the fixed support ``linspace(v_min, v_max, num_atoms)``. Q-values are the expectations.

Architecture mutations come from :class:`~agilerl.networks.base.EvolvableNetwork` (the
heads are evolvable MLPs); the distribution settings live in ``arch["extra"]`` and never
change.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from agilerl.modules.encoder import EncoderInput
from agilerl.modules.encoders import encoder_architecture
from agilerl.modules.noisy_mlp import NoisyMLP, scaled_noise
from agilerl.networks.base import EvolvableNetwork, NetworkArchitecture
from agilerl.networks.config import NetworkConfig, mlp_arch

if TYPE_CHECKING:
    from agilerl.core.value_types import Space
    from agilerl.modules.mlp import MLPArchitecture


class RainbowQNetwork(EvolvableNetwork):
    """Dueling, distributional, noisy Q-network for ``num_actions`` discrete actions."""

    support: torch.Tensor

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        heads = dict(cast(NetworkArchitecture, arch)["heads"])
        super().__init__({**arch, "heads": {}}, generator)
        self.arch = cast(NetworkArchitecture, copy.deepcopy(dict(arch)))
        self.heads = nn.ModuleDict({n: NoisyMLP(a, generator) for n, a in heads.items()})
        extra = self.arch["extra"]
        self.num_actions = int(extra["num_actions"])
        self.num_atoms = int(extra["num_atoms"])
        self.register_buffer(
            "support",
            torch.linspace(float(extra["v_min"]), float(extra["v_max"]), self.num_atoms),
        )

    @classmethod
    def build(
        cls, observation_space: Space | int, num_actions: int, net_config: NetworkConfig,
        generator: torch.Generator, *, num_atoms: int, v_min: float, v_max: float,
        noise_std: float,
    ) -> RainbowQNetwork:
        """``observation_space``: a Gymnasium space (or an int: a flat vector's width)."""
        head, latent = net_config["head_config"], net_config["latent_dim"]
        out_act = head.get("output_activation")

        def noisy_head(out_dim: int) -> MLPArchitecture:
            return {**mlp_arch(head, latent, out_dim, out_act), "noise_std": float(noise_std)}

        arch: NetworkArchitecture = {
            "encoders": {"encoder": encoder_architecture(net_config, observation_space)},
            "heads": {"value": noisy_head(num_atoms), "advantage": noisy_head(num_actions * num_atoms)},
            "head_inputs": {"value": "encoder", "advantage": "encoder"},
            "latent": {"min": net_config["min_latent_dim"], "max": net_config["max_latent_dim"]},
            "extra": {"num_actions": int(num_actions), "num_atoms": int(num_atoms),
                      "v_min": float(v_min), "v_max": float(v_max)},
        }
        return cls(arch, generator)

    def noisy_head(self, name: str) -> NoisyMLP:
        return cast(NoisyMLP, self.heads[name])

    def logits(self, obs: EncoderInput, noise: bool = True) -> torch.Tensor:
        """Per-action atom logits, shape ``(batch, num_actions, num_atoms)``."""
        latent = self.encoder("encoder").forward(obs)
        value = self.noisy_head("value").forward(latent, noise).unsqueeze(1)
        advantage = self.noisy_head("advantage").forward(latent, noise)
        advantage = advantage.view(-1, self.num_actions, self.num_atoms)
        return value + advantage - advantage.mean(dim=1, keepdim=True)

    def log_dist(self, obs: EncoderInput, noise: bool = True) -> torch.Tensor:
        """Log-probabilities of the atoms per action."""
        return torch.log_softmax(self.logits(obs, noise), dim=-1)

    def dist(self, obs: EncoderInput, noise: bool = True) -> torch.Tensor:
        """Probabilities of the atoms per action, ``(batch, num_actions, num_atoms)``."""
        return torch.softmax(self.logits(obs, noise), dim=-1)

    def forward(self, obs: EncoderInput, noise: bool = True) -> torch.Tensor:
        """Q-values ``(batch, num_actions)``: the expected return of each distribution."""
        return (self.dist(obs, noise) * self.support).sum(dim=-1)

    def _apply(
        self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True
    ) -> RainbowQNetwork:  # noqa: FBT001, FBT002
        # Moving or casting the module replaces its buffers: the cached list is stale.
        self.__dict__.pop("_noise_buffers", None)
        return super()._apply(fn, recurse)

    def reset_noise(self, generator: torch.Generator | None) -> None:
        """Draw new noise for every noisy layer (one draw for the whole network)."""
        # The buffers never change within a network (mutations build new ones): listed once.
        cached = self.__dict__.get("_noise_buffers")
        if cached is None:
            layers = [layer for name in self.heads
                      for layer in self.noisy_head(name).noisy_layers()]
            buffers = [b for layer in layers for b in (layer.eps_in, layer.eps_out)]
            cached = self.__dict__["_noise_buffers"] = (
                buffers, [b.numel() for b in buffers], sum(b.numel() for b in buffers))
        buffers, sizes, total = cached
        noise = scaled_noise(total, generator).to(self.support.device)
        with torch.no_grad():
            torch._foreach_copy_(buffers, list(noise.split(sizes)))
