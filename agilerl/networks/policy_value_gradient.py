"""PPO's actor-critic network's gradients in closed form: policy and value heads.

An :class:`~agilerl.networks.actor_critic.ActorCritic` of MLPs is one or two MLP encoders
feeding an MLP policy head and an MLP value head. :class:`PolicyValueChain` runs them
without autograd (:class:`~agilerl.networks.mlp_gradient.MLPChain`) and carries gradients
at the policy output and the value back to every parameter, a shared encoder receiving
the sum of what both heads send it. :meth:`PolicyValueChain.log_prob_entropy` evaluates
the policy's distribution (Categorical logits, or a Gaussian mean with the network's
state-independent log standard deviation) as the network does, and
:meth:`PolicyValueChain.policy_gradient` turns gradients at the log-probabilities and
entropies into the gradient at the policy output (and the log standard deviation's).
The kernels are those autograd calls, so gradients equal autograd's up to float rounding.

:meth:`PolicyValueChain.of` returns None for recurrent networks, non-MLP encoders and
activations the closed form does not cover; PPO then uses autograd.
"""

from __future__ import annotations

import math
from typing import NamedTuple, cast

import torch
from torch import nn

from agilerl.modules.mlp import EvolvableMLP
from agilerl.networks.actor_critic import ActorCritic, categorical_terms
from agilerl.networks.mlp_gradient import MLPChain, Tape, covered

#: ``log(sqrt(2 pi))``, the Gaussian log-density's constant (as ``torch.distributions``).
LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


class PolicyEvaluation(NamedTuple):
    """Log-probabilities and entropies of a minibatch's actions, per row, with what their
    gradient needs."""

    log_prob: torch.Tensor
    entropy: torch.Tensor
    # Categorical: the log-probabilities of every action; Gaussian: (a - mean) / var.
    saved: torch.Tensor
    # Categorical: the probabilities; Gaussian: (a - mean)^2 / var.
    saved_too: torch.Tensor


class Tapes(NamedTuple):
    """What a recorded forward pass keeps, per chain."""

    encoders: dict[str, Tape]
    policy: Tape
    value: Tape


class PolicyValueChain:
    """The policy and value outputs of an MLP :class:`ActorCritic`, with their backward."""

    def __init__(self, network: ActorCritic) -> None:
        self.encoders = {name: MLPChain([cast(EvolvableMLP, encoder)])
                         for name, encoder in network.encoders.items()}
        self.policy = MLPChain([cast(EvolvableMLP, network.heads["policy"])])
        self.value = MLPChain([cast(EvolvableMLP, network.heads["value"])])
        inputs = network.arch["head_inputs"]
        self.policy_input, self.value_input = inputs["policy"], inputs["value"]
        self.continuous = network.continuous
        self.log_std: torch.Tensor | None = network.log_std if self.continuous else None
        self.parameters = [p for chain in (*self.encoders.values(), self.policy, self.value)
                           for p in chain.parameters]
        if self.log_std is not None:
            self.parameters.append(self.log_std)

    @classmethod
    def of(cls, network: nn.Module) -> PolicyValueChain | None:
        """The chain of ``network``, or None when its gradient is not covered here."""
        if type(network) is not ActorCritic:
            return None
        parts = [*network.encoders.values(), *network.heads.values()]
        if set(network.heads) != {"policy", "value"} or not all(
                isinstance(part, EvolvableMLP) for part in parts):
            return None
        chain = cls(network)
        chains = (*chain.encoders.values(), chain.policy, chain.value)
        if not all(covered(act) for c in chains for _, _, _, act in c.plan):
            return None
        if {id(p) for p in network.parameters()} != {id(p) for p in chain.parameters}:
            return None
        return chain

    def tapes(self) -> Tapes:
        """Empty tapes for :meth:`run`."""
        return Tapes({name: [] for name in self.encoders}, [], [])

    def run(self, obs: torch.Tensor, tapes: Tapes | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy output (logits or Gaussian mean) and value, shape ``(batch,)``, of a 2-D
        batch of observations; ``tapes`` receive what :meth:`backward_into` needs."""
        latents = {name: encoder.run(obs, tapes.encoders[name] if tapes else None)
                   for name, encoder in self.encoders.items()}
        policy_out = self.policy.run(latents[self.policy_input], tapes.policy if tapes else None)
        value = self.value.run(latents[self.value_input], tapes.value if tapes else None)
        return policy_out, value.squeeze(-1)

    def log_prob_entropy(self, policy_out: torch.Tensor, actions: torch.Tensor
                         ) -> PolicyEvaluation:
        """What ``ActorCritic.log_prob_entropy`` gives, with what the gradient needs."""
        if self.continuous:
            assert self.log_std is not None
            std = self.log_std.detach().exp().expand_as(policy_out)
            var = std.square()
            diff = actions - policy_out
            scaled = diff / var
            log_prob = (-(diff.square()) / (2 * var) - std.log() - LOG_SQRT_2PI).sum(-1)
            entropy = (0.5 + LOG_SQRT_2PI + std.log()).sum(-1)
            return PolicyEvaluation(log_prob, entropy, scaled, scaled * diff)
        return PolicyEvaluation(*categorical_terms(policy_out, actions))

    def policy_gradient(self, evaluation: PolicyEvaluation, actions: torch.Tensor,
                        grad_log_prob: torch.Tensor, grad_entropy: float
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The gradient at the policy output (and at the log standard deviation, Gaussian
        only) of ``sum(grad_log_prob * log_prob + grad_entropy * entropy)`` (the same
        ``grad_entropy`` for every row).

        Categorical: ``d log p(a) / dz = onehot(a) - p`` and ``dH / dz = -p (log p + H)``.
        Gaussian: ``d log p / d mean = (a - mean) / var``, ``d log p / d log_std =
        (a - mean)^2 / var - 1`` and ``dH / d log_std = 1``, per action dimension.
        """
        if self.continuous:
            scaled, squared = evaluation.saved, evaluation.saved_too
            grad_out = scaled * grad_log_prob.unsqueeze(-1)
            grad_log_std = (grad_log_prob @ (squared - 1.0)) + grad_entropy * len(grad_log_prob)
            return grad_out, grad_log_std
        log_pmf, probs = evaluation.saved, evaluation.saved_too
        grad_out = probs * (log_pmf + evaluation.entropy.unsqueeze(-1))
        grad_out.mul_(-grad_entropy)
        grad_out.addcmul_(probs, grad_log_prob.unsqueeze(-1), value=-1.0)
        grad_out.scatter_add_(-1, actions.unsqueeze(-1), grad_log_prob.unsqueeze(-1))
        return grad_out, None

    def backward_into(self, tapes: Tapes, grad_policy: torch.Tensor,
                      grad_value: torch.Tensor, grads: dict[int, torch.Tensor],
                      grad_log_std: torch.Tensor | None = None) -> None:
        """Write the gradient of ``sum(grad_policy * policy_out + grad_value * value)``
        with respect to every parameter into ``grads`` (``id(parameter)`` -> its gradient
        tensor, overwritten), the log standard deviation's being ``grad_log_std`` (from
        :meth:`policy_gradient`); ``grad_*`` must carry no graph."""
        if self.log_std is not None:
            assert grad_log_std is not None
            grads[id(self.log_std)].copy_(grad_log_std)
        sent = {
            self.policy_input: self.policy.backward_to_input(
                tapes.policy, grad_policy, into=self.policy.gradient_slots(grads)),
        }
        to_value = self.value.backward_to_input(
            tapes.value, grad_value.unsqueeze(-1), into=self.value.gradient_slots(grads))
        if self.value_input in sent:
            sent[self.value_input] = sent[self.value_input] + to_value
        else:
            sent[self.value_input] = to_value
        for name, encoder in self.encoders.items():
            encoder.backward_into(tapes.encoders[name], sent[name],
                                  encoder.gradient_slots(grads))
