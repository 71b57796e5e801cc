"""DDPG's and TD3's networks, targets and Adam states in flat buffers.

The actor-critic form of :mod:`agilerl.networks.flat_params`: one
:class:`~agilerl.networks.flat_params.FlatTraining` for the actor (with its target and
``actor_optimizer``) and one for every critic together (with their targets and
``critic_optimizer``). The closed-form chains write their gradients straight into the
flat gradient buffers, and an Adam step or a soft update is then one kernel per buffer
instead of one per parameter tensor; the maths is unchanged (see ``flat_params``).

Not used with ``share_encoders`` (the actor's optimizer then steps its head only, while
the soft update moves its whole network).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import torch
from torch import nn

from agilerl.networks.actor_critic_gradient import ActorCriticChains, CriticSlots
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.optim import Adam


class NetworkGroup:
    """Networks seen as one module: their parameters, one network after another (the
    order in which an optimizer over them holds them)."""

    def __init__(self, networks: Sequence[nn.Module]) -> None:
        self.networks = list(networks)

    def parameters(self) -> Iterator[torch.Tensor]:
        for network in self.networks:
            yield from network.parameters()


class ActorCriticBuffers(NamedTuple):
    """The actor's and the critics' flat buffers, and where each chain of the
    :class:`ActorCriticChains` they were built with writes into them."""

    actor: FlatTraining
    critic: FlatTraining
    #: per layer: its weight's and bias's gradients, and its layer norm's (None without one)
    actor_slots: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]]
    critic_slots: list[CriticSlots]  # per critic, in ``critic_names`` order

    @classmethod
    def build(cls, chains: ActorCriticChains, networks: Mapping[str, nn.Module],
              optimizers: Mapping[str, Adam], critic_names: Sequence[str]
              ) -> ActorCriticBuffers | None:
        """The buffers of ``networks`` and their two optimizers, or None when either
        optimizer does not fit :meth:`FlatTraining.build`'s pattern."""
        actor = FlatTraining.build(NetworkGroup([networks["actor"]]),
                                   NetworkGroup([networks["actor_target"]]),
                                   optimizers["actor_optimizer"])
        critic = FlatTraining.build(NetworkGroup([networks[n] for n in critic_names]),
                                    NetworkGroup([networks[f"{n}_target"] for n in critic_names]),
                                    optimizers["critic_optimizer"])
        if actor is None or critic is None:
            return None
        critic_grads = _gradients(critic)
        return cls(actor, critic, chains.actor.chain.gradient_slots(_gradients(actor)),
                   [c.gradient_slots(critic_grads) for c in chains.critics])

    def bound_to(self, optimizers: Mapping[str, Adam]) -> bool:
        """Whether these buffers still hold ``optimizers``' state and the parameters' values
        (no optimizer or state replaced, no parameter moved off its view). Whether the
        networks were replaced is the caller's to check: they are the chains'."""
        return all(flat.bound_to(flat.online, flat.target, optimizers[name])
                   for flat, name in ((self.actor, "actor_optimizer"),
                                      (self.critic, "critic_optimizer")))

    def soft_update(self, tau: float) -> None:
        """target <- tau * online + (1 - tau) * target, for the actor and every critic."""
        self.actor.soft_update(tau)
        self.critic.soft_update(tau)


def _gradients(flat: FlatTraining) -> dict[int, torch.Tensor]:
    return {id(p): g for p, g in zip(flat.params, flat.grads, strict=True)}
