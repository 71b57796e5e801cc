"""Centralised state-action value network (critics of MADDPG, MATD3).

``Q_i(o_1, ..., o_N, a_1, ..., a_N)``: one critic per agent that sees every agent's
observation and action. Each agent's observation has its own encoder (any evolvable
encoder, built from that agent's group network config, so an image-observing agent gets a
CNN; a vector observation goes through one dense layer, see
:func:`observation_encoder_architecture`); the head reads ``[a_1, ..., a_N, z_1, ...,
z_N]``, the agents' critic-side actions (normalised continuous actions, relaxed action
vectors of discrete ones) followed by their latents, in the order of ``extra["agents"]``.

A latent-width mutation of agent ``k``'s encoder changes only the head's input columns of
``z_k`` (new columns start at zero, so the value function is unchanged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

import torch

from agilerl.modules.encoder import EncoderArchitecture, EncoderInput, MutationPlan
from agilerl.modules.encoders import encoder_architecture
from agilerl.networks.base import EvolvableNetwork, NetworkArchitecture
from agilerl.networks.config import NetworkConfig, mlp_arch

if TYPE_CHECKING:
    from agilerl.core.value_types import Space
    from agilerl.modules.mlp import MLPArchitecture


def observation_encoder_architecture(
    net_config: NetworkConfig, space: Space | int
) -> EncoderArchitecture:
    """A critic's encoder of one agent's observation: the agent's configured encoder,
    except that an MLP encoder (a flat vector observation) is a single dense layer to the
    latent (no hidden layers, and none added by mutation), as in the reference's
    multi-input critic. With the configured hidden layers, speaker-listener's actors were
    driven into confident, bad moves (``docs/training.md``, "Multi-agent off-policy", has
    the measurements).
    """
    arch = encoder_architecture(net_config, space)
    if arch.get("kind") == "mlp":
        cast("MLPArchitecture", arch).update(
            {"hidden_size": [], "min_hidden_layers": 0, "max_hidden_layers": 0}
        )
    return arch


class CentralisedQNetwork(EvolvableNetwork):
    """Per-agent encoders + MLP head ``q`` over every agent's action and latent."""

    @classmethod
    def build(
        cls,
        agents: Sequence[str],
        observation_spaces: Mapping[str, Space | int],
        action_dims: Mapping[str, int],
        net_configs: Mapping[str, NetworkConfig],
        head_config: NetworkConfig,
        generator: torch.Generator,
    ) -> CentralisedQNetwork:
        """``net_configs[agent]``: the network config of that agent's group (its encoder
        and latent width); ``head_config``: the config of the critic's owner (its head and
        latent bounds)."""
        agents = list(agents)
        encoders = {
            a: observation_encoder_architecture(net_configs[a], observation_spaces[a])
            for a in agents
        }
        width = sum(int(action_dims[a]) + int(net_configs[a]["latent_dim"]) for a in agents)
        # A value is unbounded: the head's output activation (meant for actors) is not used.
        arch: NetworkArchitecture = {
            "encoders": encoders,
            "heads": {"q": mlp_arch(head_config["head_config"], width, 1, None)},
            "head_inputs": {"q": agents[0]},
            "latent": {"min": head_config["min_latent_dim"], "max": head_config["max_latent_dim"]},
            "extra": {"agents": agents, "action_dims": [int(action_dims[a]) for a in agents]},
        }
        return cls(arch, generator)

    @property
    def agents(self) -> list[str]:
        return list(self.arch["extra"]["agents"])

    def forward(
        self, obs: Mapping[str, EncoderInput], actions: Mapping[str, torch.Tensor]
    ) -> torch.Tensor:
        """Values ``(batch,)`` of the joint observations and critic-side actions (dicts
        agent -> batch)."""
        agents = self.arch["extra"]["agents"]
        parts = [actions[a] for a in agents]
        parts += [self.encoder(a).forward(obs[a]) for a in agents]
        return self.head("q").forward(torch.cat(parts, dim=-1)).squeeze(-1)

    def _resize_latent(self, encoder: str, plan: MutationPlan) -> None:
        agents = self.arch["extra"]["agents"]
        old_width = self.encoder(encoder).out_dim
        delta = int(plan["nodes"]) if plan["op"] == "add_nodes" else -int(plan["nodes"])
        bounds = self.arch["latent"]
        new_width = max(bounds["min"], min(bounds["max"], old_width + delta))
        seed = int(plan["seed"])
        self.encoders[encoder] = self.encoder(encoder).resized(out_dim=new_width, seed=seed)
        # Columns of this encoder's latent in the head's input: after every action and the
        # latents of the agents before it.
        start = sum(self.arch["extra"]["action_dims"]) + sum(
            self.encoder(a).out_dim for a in agents[: agents.index(encoder)]
        )
        old_head = self.head("q")
        total = old_head.arch["in_dim"] + new_width - old_width
        new_head = old_head.resized(in_dim=total, seed=seed + 1)
        keep = min(old_width, new_width)
        with torch.no_grad():
            old_w, new_w = old_head.linear(0).weight, new_head.linear(0).weight
            new_w[:, : start + keep] = old_w[:, : start + keep]
            new_w[:, start + keep : start + new_width] = 0.0
            new_w[:, start + new_width :] = old_w[:, start + old_width :]
        self.heads["q"] = new_head
