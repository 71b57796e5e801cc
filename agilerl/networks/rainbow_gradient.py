"""Gradients of a Rainbow Q-network (MLP encoder, noisy dueling heads) in closed form.

The Rainbow update is many small kernels on a small network (two noisy heads of one or two
128-wide layers over a 64-wide latent, batches of 64): autograd's bookkeeping costs more
than the arithmetic. :class:`RainbowChain` runs the network's forward pass without
autograd and carries a gradient with respect to its atom logits back to every parameter
with the same kernels autograd calls (:class:`~agilerl.networks.mlp_gradient.MLPChain`),
so the gradients equal autograd's up to float rounding.

A noisy layer's effective weight is ``mu + sigma * outer(eps_out, eps_in)``
(:class:`~agilerl.modules.noisy_mlp.NoisyLinear`). :class:`NoisyMLPChain` keeps it in a
buffer, refreshed by :meth:`NoisyMLPChain.apply_noise` before each pass (``mu`` and
``sigma`` change with every optimizer step, ``eps`` with every noise draw); the weight's
gradient is ``mu``'s, and ``sigma``'s is that times the noise.

Covered: an :class:`~agilerl.modules.mlp.MLPEncoder` and :class:`NoisyMLP` heads whose
activations :mod:`~agilerl.networks.mlp_gradient` covers. :meth:`RainbowChain.of` returns
None for anything else, and the agent falls back to autograd.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, cast

import torch
from torch import nn

from agilerl.modules.mlp import EvolvableMLP
from agilerl.modules.noisy_mlp import NoisyMLP
from agilerl.networks.mlp_gradient import GradientSlots, MLPChain, Tape, covered, first_rows

if TYPE_CHECKING:
    from agilerl.networks.rainbow_q_network import RainbowQNetwork

#: Parameter id -> its gradient tensor (in a flat gradient buffer).
GradientViews = dict[int, torch.Tensor]
#: A noisy head's ``into``, its ``mu`` gradient views and its ``sigma`` ones.
NoisySlots: TypeAlias = tuple[list[GradientSlots], list[torch.Tensor], list[torch.Tensor]]
#: The encoder's ``into`` and each noisy head's slots.
ChainSlots: TypeAlias = tuple[list[GradientSlots], NoisySlots, NoisySlots]


class NoisyMLPChain:
    """A :class:`NoisyMLP` as an :class:`MLPChain` over its current noisy weights."""

    def __init__(self, mlp: NoisyMLP) -> None:
        self.layers = mlp.noisy_layers()
        means = mlp.__dict__.get("_plan") or mlp._make_plan()
        self.weights = [layer.weight.detach().clone() for layer in self.layers]
        self.biases = [layer.bias.detach().clone() for layer in self.layers]
        self.outers = [torch.empty_like(w) for w in self.weights]
        plan = [(w, b, norm, act) for w, b, (_, _, norm, act)
                in zip(self.weights, self.biases, means, strict=True)]
        # The autograd pass of a noisy head registers no ReGraMa hooks; neither does this.
        self.chain = MLPChain([mlp], plan, [None] * len(plan))
        self._noisy = self.weights + self.biases
        self._noise: list[torch.Tensor] = []
        self._key = -1

    def _parameters(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The means and scales, detached; read again when their storage was replaced
        (see ``flat_params``)."""
        key = self.layers[0].weight.data_ptr()
        if key != self._key:
            self._key = key
            self._means = [layer.weight.detach() for layer in self.layers] + [
                layer.bias.detach() for layer in self.layers]
            self._sigmas = [layer.weight_sigma.detach() for layer in self.layers] + [
                layer.bias_sigma.detach() for layer in self.layers]
        return self._means, self._sigmas

    def apply_noise(self) -> None:
        """Refresh the effective weights from the current means, scales and noise (the
        noise buffers are read afresh: moving a module replaces them)."""
        eps_out = [layer.eps_out for layer in self.layers]
        for layer, out, outer in zip(self.layers, eps_out, self.outers, strict=True):
            torch.mul(out[:, None], layer.eps_in[None, :], out=outer)
        self._noise = self.outers + eps_out
        means, sigmas = self._parameters()
        # One kernel per tensor (the foreach forms copy, then add: two on the CPU).
        for noisy, mean, sigma, noise in zip(self._noisy, means, sigmas, self._noise,
                                             strict=True):
            torch.addcmul(mean, sigma, noise, out=noisy)

    def slots(self, grads: GradientViews) -> NoisySlots:
        """``into`` for :meth:`MLPChain.backward_to_input` (each layer's ``mu`` gradient and
        its layer norm's), and the gradient views of ``mu`` and of ``sigma`` in the order
        of :meth:`sigma_gradients`."""
        into = [(grads[id(layer.weight)], grads[id(layer.bias)],
                 grads[id(norm[1])] if norm is not None else None,
                 grads[id(norm[2])] if norm is not None else None)
                for layer, (_, _, norm, _) in zip(self.layers, self.chain.plan, strict=True)]
        mean_grads = [grads[id(layer.weight)] for layer in self.layers] + [
            grads[id(layer.bias)] for layer in self.layers]
        sigma_grads = [grads[id(layer.weight_sigma)] for layer in self.layers] + [
            grads[id(layer.bias_sigma)] for layer in self.layers]
        return into, mean_grads, sigma_grads

    def sigma_gradients(self, mean_grads: list[torch.Tensor],
                        sigma_grads: list[torch.Tensor]) -> None:
        """``sigma``'s gradients from ``mu``'s: the effective weight's gradient times the
        noise it was drawn with."""
        for sigma_grad, mean_grad, noise in zip(sigma_grads, mean_grads, self._noise,
                                                strict=True):
            torch.mul(mean_grad, noise, out=sigma_grad)


class RainbowChain:
    """A :class:`~agilerl.networks.rainbow_q_network.RainbowQNetwork`'s atom logits and
    their backward pass, without autograd."""

    def __init__(self, network: RainbowQNetwork, encoder: EvolvableMLP) -> None:
        self.encoder = MLPChain([encoder])
        self.value = NoisyMLPChain(network.noisy_head("value"))
        self.advantage = NoisyMLPChain(network.noisy_head("advantage"))
        self.num_actions, self.num_atoms = network.num_actions, network.num_atoms
        self._slots: tuple[GradientViews, ChainSlots] | None = None

    @classmethod
    def of(cls, network: nn.Module) -> RainbowChain | None:
        """The chain of ``network`` (an MLP encoder feeding noisy ``value`` and
        ``advantage`` heads), or None when its gradient is not covered here."""
        encoders = getattr(network, "encoders", None)
        heads = getattr(network, "heads", None)
        if encoders is None or heads is None or len(encoders) != 1 or set(heads) != {
                "value", "advantage"}:
            return None
        encoder = next(iter(encoders.values()))
        mlps = [encoder, heads["value"], heads["advantage"]]
        if isinstance(encoder, NoisyMLP) or not isinstance(encoder, EvolvableMLP) or not all(
                isinstance(head, NoisyMLP) for head in mlps[1:]):
            return None
        if not all(covered(act) for mlp in mlps
                   for _, _, _, act in (mlp.__dict__.get("_plan") or mlp._make_plan())):
            return None
        own = {id(p) for mlp in mlps for p in mlp.parameters()}
        if {id(p) for p in network.parameters()} != own:
            return None
        # a Rainbow network: an encoder and the noisy ``value`` and ``advantage`` heads
        return cls(cast("RainbowQNetwork", network), encoder)

    def apply_noise(self) -> None:
        """Bring the noisy weights up to date (call before each pass)."""
        self.value.apply_noise()
        self.advantage.apply_noise()

    def logits(self, obs: torch.Tensor, tape: list[Tape] | None = None) -> torch.Tensor:
        """Per-action atom logits ``(batch, num_actions, num_atoms)`` with the current noise
        (see :meth:`apply_noise`); with ``tape`` (a list), what :meth:`backward_into` needs
        is appended to it."""
        tapes: list[Tape] | None = [[], [], []] if tape is not None else None
        latent = self.encoder.run(obs, tapes[0] if tapes else None)
        value = self.value.chain.run(latent, tapes[1] if tapes else None)
        advantage = self.advantage.chain.run(latent, tapes[2] if tapes else None)
        advantage = advantage.view(-1, self.num_actions, self.num_atoms)
        if tape is not None and tapes is not None:
            tape.extend(tapes)
        # In the network's own order (RainbowQNetwork.logits), so the values are its own.
        return value.unsqueeze(1) + advantage - advantage.mean(dim=1, keepdim=True)

    def backward_into(self, tape: list[Tape], grad: torch.Tensor, grads: GradientViews) -> None:
        """Write into ``grads`` (every parameter's gradient view) the gradient of
        ``sum(grad * logits)``, the logits being those :meth:`logits` recorded in
        ``tape``; ``grad`` covers the first ``len(grad)`` rows of those logits (the others
        are taken to have none: they are left out of the backward pass)."""
        encoder_into, value_slots, advantage_slots = self._gradient_slots(grads)
        if len(grad) != len(tape[0][0][0]):
            tape = [first_rows(part, len(grad)) for part in tape]
        # Dueling: logits = V + A - mean_a A, so dV sums over actions and dA is centred.
        grad_value = grad.sum(1)
        grad_advantage = (grad - grad.mean(dim=1, keepdim=True)).view(len(grad), -1)
        latent_grad = self.value.chain.backward_to_input(tape[1], grad_value, True,
                                                          value_slots[0])
        latent_grad = latent_grad.add_(self.advantage.chain.backward_to_input(
            tape[2], grad_advantage, True, advantage_slots[0]))
        self.encoder.backward_into(tape[0], latent_grad, encoder_into)
        self.value.sigma_gradients(value_slots[1], value_slots[2])
        self.advantage.sigma_gradients(advantage_slots[1], advantage_slots[2])

    def _gradient_slots(self, grads: GradientViews) -> ChainSlots:
        if self._slots is None or self._slots[0] is not grads:
            self._slots = (grads, (self.encoder.gradient_slots(grads),
                                   self.value.slots(grads), self.advantage.slots(grads)))
        return self._slots[1]

