"""Stochastic actor and value function for policy-gradient methods (PPO).

One module holds both so that ``share_encoders`` (one encoder, two heads) and separate
encoders are the same code: ``head_inputs`` says which encoder feeds each head.

* Discrete actions: the policy head outputs logits of a Categorical distribution.
* Box actions: the policy head outputs the Gaussian mean; the log standard deviation is a
  state-independent parameter initialised to ``log(action_std_init)``. With
  ``squash_output`` the environment receives ``tanh(u)`` rescaled to the action bounds
  (``u`` the Gaussian sample, which is what the learner stores); otherwise ``u`` clipped
  to the bounds.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from agilerl.modules.encoder import EncoderInput
from agilerl.modules.encoders import encoder_architecture
from agilerl.networks.base import EvolvableNetwork, NetworkArchitecture
from agilerl.networks.config import NetworkConfig, mlp_arch

if TYPE_CHECKING:
    from agilerl.core.value_types import Space

#: Lower bound on the initial standard deviation (``action_std_init`` may be 0).
MIN_STD = 1e-6


class CategoricalTerms(NamedTuple):
    """A categorical policy's evaluation of a batch of actions, per row."""

    log_prob: torch.Tensor
    entropy: torch.Tensor
    log_pmf: torch.Tensor  # every action's log-probability, impossible ones at the minimum
    probs: torch.Tensor


def categorical_terms(logits: torch.Tensor, actions: torch.Tensor) -> CategoricalTerms:
    """Log-probability of ``actions`` (int64) and entropy per row of ``Categorical(logits)``,
    with every action's log-probability and probability (what a closed-form gradient
    reads). Acting draws its log-probabilities from the same ``log_softmax``."""
    log_pmf = torch.log_softmax(logits, dim=-1)
    log_prob = log_pmf.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    # As the distribution's entropy: an impossible action's -inf becomes the minimum.
    clamped = torch.clamp(log_pmf, min=torch.finfo(log_pmf.dtype).min)
    probs = log_pmf.exp()
    return CategoricalTerms(log_prob, (clamped * probs).sum(-1).neg(), clamped, probs)


class ActorCritic(EvolvableNetwork):
    """Policy head ``policy`` and value head ``value`` over one or two encoders (any arch)."""

    def __init__(self, arch: Mapping[str, object], generator: torch.Generator | None = None):
        super().__init__(arch, generator)
        extra = self.arch["extra"]
        self.continuous = bool(extra["continuous"])
        if self.continuous:
            std = max(float(extra["action_std_init"]), MIN_STD)
            self.log_std = nn.Parameter(torch.full((extra["action_dim"],), math.log(std)))

    @classmethod
    def build(
        cls,
        observation_space: Space | int,
        action_dim: int,
        *,
        continuous: bool,
        net_config: NetworkConfig,
        share_encoders: bool,
        action_std_init: float,
        generator: torch.Generator,
    ) -> ActorCritic:
        """``observation_space``: a Gymnasium space (or an int: a flat vector's width)."""
        head, latent = net_config["head_config"], net_config["latent_dim"]
        enc_arch = encoder_architecture(net_config, observation_space)
        names = ("encoder", "encoder") if share_encoders else ("actor", "critic")
        arch: NetworkArchitecture = {
            "encoders": {name: copy.deepcopy(enc_arch) for name in dict.fromkeys(names)},
            "heads": {
                "policy": mlp_arch(head, latent, action_dim),
                "value": mlp_arch(head, latent, 1),
            },
            "head_inputs": {"policy": names[0], "value": names[1]},
            "latent": {"min": net_config["min_latent_dim"], "max": net_config["max_latent_dim"]},
            "extra": {
                "continuous": continuous,
                "action_dim": action_dim,
                "action_std_init": float(action_std_init),
                "squash_output": bool(net_config.get("squash_output", False)),
            },
        }
        return cls(arch, generator)

    def forward(self, obs: EncoderInput) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy output (logits or Gaussian mean) and state value."""
        inputs = self.arch["head_inputs"]
        policy_latent = self.encoders[inputs["policy"]](obs)
        if inputs["value"] == inputs["policy"]:
            value_latent = policy_latent
        else:
            value_latent = self.encoders[inputs["value"]](obs)
        return self.heads["policy"](policy_latent), self.heads["value"](value_latent).squeeze(-1)

    def policy(self, obs: EncoderInput) -> torch.Tensor:
        return self.heads["policy"](self.encoders[self.arch["head_inputs"]["policy"]](obs))

    def distribution(self, policy_out: torch.Tensor) -> torch.distributions.Distribution:
        if self.continuous:
            std = self.log_std.exp().expand_as(policy_out)
            return torch.distributions.Normal(policy_out, std)
        return torch.distributions.Categorical(logits=policy_out)

    def log_prob_entropy(
        self, policy_out: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability of ``actions`` and entropy under the policy, per row (summed
        over action dimensions for Box actions): what ``distribution`` gives.

        Discrete actions skip the ``Categorical`` object: it validates its arguments and
        the sample with a dozen tensor ops per call, which is most of a minibatch update
        on small networks. :func:`categorical_terms` does its maths, with the
        log-probabilities taken by one ``log_softmax`` instead of a ``logsumexp`` and a
        subtraction (equal up to float rounding, and several times cheaper on a few rows).
        """
        if self.continuous:
            dist = self.distribution(policy_out)
            return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1)
        terms = categorical_terms(policy_out, actions.long())
        return terms.log_prob, terms.entropy
