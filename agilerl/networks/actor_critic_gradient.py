"""DDPG and TD3 networks' gradients in closed form: the critic ``Q(s, a)`` and the policy.

A critic (:class:`~agilerl.networks.continuous_q.ContinuousQNetwork`) is two MLP chains:
the encoder reads ``s`` and the head reads ``[a, latent]``. :class:`CriticChain` runs both
without autograd and carries a gradient at ``Q`` back to every parameter (the critic's
step) or, through the head alone with its parameters frozen, to the action (the actor's
step: ``dQ/da``, which :class:`~agilerl.networks.mlp_gradient.MLPChain` then carries
through the policy). The kernels are those autograd calls, so gradients equal autograd's
up to float rounding, and the pre-activation gradients ReGraMa keeps are recorded where
autograd's hooks record them.

:meth:`ActorCriticChains.of` returns None unless every network is an MLP encoder and an
MLP head with covered activations; the algorithm then uses autograd.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, cast

import torch
from torch import nn

from agilerl.modules.mlp import EvolvableMLP
from agilerl.networks.continuous_q import ContinuousQNetwork
from agilerl.networks.deterministic_actor import DeterministicActor
from agilerl.networks.mlp_gradient import GradientSlots, MLPChain, Tape, covered


class CriticSlots(NamedTuple):
    """Where :meth:`CriticChain.backward` writes a critic's gradients, per chain."""

    encoder: list[GradientSlots]
    head: list[GradientSlots]


class CriticChain:
    """``Q(s, a) = head([a, encoder(s)])`` with a recorded forward and its backward."""

    def __init__(self, network: ContinuousQNetwork) -> None:
        self.encoder = MLPChain([cast(EvolvableMLP, network.encoders["encoder"])])
        self.head = MLPChain([cast(EvolvableMLP, network.heads["q"])])
        self.action_dim = int(network.arch["extra"]["action_dim"])
        self.parameters = self.encoder.parameters + self.head.parameters

    @classmethod
    def of(cls, network: nn.Module) -> CriticChain | None:
        """The chain of ``network``, or None when its gradient is not covered here."""
        if type(network) is not ContinuousQNetwork or not _mlp_parts(network, "q"):
            return None
        chain = cls(network)
        return chain if _covers(chain.parameters, network, (chain.encoder, chain.head)) else None

    def run(self, obs: torch.Tensor, action: torch.Tensor, encoder_tape: Tape | None = None,
            head_tape: Tape | None = None) -> torch.Tensor:
        """``Q(s, a)`` for a batch, shape ``(batch,)``; the tapes (lists) receive what the
        backward passes need."""
        latent = self.encoder.run(obs, encoder_tape)
        return self.head.run(torch.cat([action, latent], dim=-1), head_tape).squeeze(-1)

    def backward(self, encoder_tape: Tape, head_tape: Tape, grad_q: torch.Tensor,
                 into: CriticSlots | None = None) -> None:
        """Set ``.grad`` of every parameter to the gradient of ``sum(grad_q * Q)``; with
        ``into`` (see :meth:`gradient_slots`), write it there instead."""
        grad_in = self.head.backward_to_input(head_tape, grad_q.unsqueeze(-1),
                                              into=None if into is None else into.head)
        if into is None:
            self.encoder.backward(encoder_tape, grad_in[:, self.action_dim:])
        else:
            self.encoder.backward_into(encoder_tape, grad_in[:, self.action_dim:], into.encoder)

    def gradient_slots(self, grads: dict[int, torch.Tensor]) -> CriticSlots:
        """``into`` for :meth:`backward` from ``grads`` (``id(parameter)`` -> its gradient
        tensor)."""
        return CriticSlots(self.encoder.gradient_slots(grads), self.head.gradient_slots(grads))

    def action_gradient(self, head_tape: Tape, grad_q: torch.Tensor) -> torch.Tensor:
        """The gradient of ``sum(grad_q * Q)`` with respect to the action, the critic's
        parameters frozen."""
        grad_in = self.head.backward_to_input(head_tape, grad_q.unsqueeze(-1), parameters=False)
        return grad_in[:, : self.action_dim]


class PolicyChain:
    """The deterministic policy ``mu(s)``: an MLP chain, then ``2x - 1`` for a sigmoid
    output."""

    def __init__(self, chain: MLPChain, affine: bool) -> None:
        self.chain, self.affine = chain, affine

    @classmethod
    def of(cls, network: nn.Module) -> PolicyChain | None:
        """The chain of ``network``, or None when its gradient is not covered here."""
        if type(network) is not DeterministicActor:
            return None
        chain = MLPChain.of(network)
        return None if chain is None else cls(chain, bool(network.arch["extra"]["affine"]))

    def run(self, obs: torch.Tensor, tape: Tape | None = None) -> torch.Tensor:
        """The normalised actions for a batch of observations."""
        out = self.chain.run(obs, tape)
        return out * 2.0 - 1.0 if self.affine else out

    def backward(self, tape: Tape, grad_action: torch.Tensor,
                 into: list[GradientSlots] | None = None) -> None:
        """Set ``.grad`` of every parameter to the gradient of ``sum(grad_action * mu)``;
        with ``into`` (``MLPChain.gradient_slots``), write it there instead."""
        grad = grad_action * 2.0 if self.affine else grad_action
        if into is None:
            self.chain.backward(tape, grad)
        else:
            self.chain.backward_into(tape, grad, into)


class ActorCriticChains(NamedTuple):
    """The closed-form chains of a DDPG or TD3 agent's networks."""

    actor: PolicyChain
    actor_target: PolicyChain
    critics: list[CriticChain]  # in the order of the agent's ``critic_names``
    critic_targets: list[CriticChain]

    @classmethod
    def of(cls, networks: Mapping[str, nn.Module], critic_names: Sequence[str]
           ) -> ActorCriticChains | None:
        """The chains of ``networks`` (``actor``, each critic and their ``*_target``), or
        None when any is not covered, or two critics share a parameter (each critic's
        gradient is set, not accumulated)."""
        policies = [PolicyChain.of(networks[n]) for n in ("actor", "actor_target")]
        critics = [CriticChain.of(networks[n]) for n in critic_names]
        targets = [CriticChain.of(networks[f"{n}_target"]) for n in critic_names]
        actor, actor_target = policies
        if actor is None or actor_target is None:
            return None
        online = [c for c in critics if c is not None]
        known = [t for t in targets if t is not None]
        if len(online) != len(critics) or len(known) != len(targets):
            return None
        ids = [id(p) for c in online for p in c.parameters]
        if len(ids) != len(set(ids)):
            return None
        return cls(actor, actor_target, online, known)


def _mlp_parts(network: nn.Module, head: str) -> bool:
    """Whether ``network`` is one MLP encoder named ``encoder`` and one MLP head ``head``."""
    encoders, heads = getattr(network, "encoders", None), getattr(network, "heads", None)
    if encoders is None or heads is None or set(encoders) != {"encoder"} or set(heads) != {head}:
        return False
    return isinstance(encoders["encoder"], EvolvableMLP) and isinstance(heads[head], EvolvableMLP)


def _covers(parameters: Sequence[torch.Tensor], network: nn.Module, chains: Sequence[MLPChain]) -> bool:
    """Whether ``parameters`` are exactly ``network``'s and every activation is covered."""
    if {id(p) for p in network.parameters()} != {id(p) for p in parameters}:
        return False
    return all(covered(act) for chain in chains for _, _, _, act in chain.plan)
