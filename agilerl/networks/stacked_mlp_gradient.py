"""Closed-form gradients of several same-architecture MLP chains at once.

The batched population update (:mod:`agilerl.algorithms.stacked_update`) stacks the
parameters of members whose networks share one architecture along a leading member
dimension. :class:`StackedMLPChain` runs those members' networks as one chain of grouped
matrix products (``baddbmm``/``bmm``) and applies the chain rule of
:class:`~agilerl.networks.mlp_gradient.MLPChain` to the stacks, with the same backward
kernels per activation and layer norm, so every member's gradient equals the one its own
:class:`MLPChain` computes up to float rounding, without the autograd engine.

Activations: those of :class:`MLPChain` (ReLU, Tanh, Sigmoid, none) and the others an
architecture mutation draws (ELU, GELU), plus LeakyReLU and Softplus, each with the
backward kernel autograd calls for it. :meth:`StackedMLPChain.of` is None for any other.

A layer norm normalises all members' rows in one call (``native_layer_norm`` takes one
affine for the whole batch: a unit one) and then scales and shifts each member's rows by its
own weight and bias.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, cast

import torch

from agilerl.modules.mlp import Activation
from agilerl.networks.mlp_gradient import (
    LAYER_NORM_BACKWARD,
    ActivationGradient,
    MLPChain,
    activation_gradient,
    covered,
)
from agilerl.networks.stacked_mlp import GradientKeeper

#: Per layer: (input, pre-norm value, normalised value, norm mean, norm rstd, activation
#: input, output).
StackedTape = list[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None,
                         torch.Tensor | None, torch.Tensor | None, torch.Tensor | None,
                         torch.Tensor]]

class _Norm(NamedTuple):
    """A layer norm's shape and eps, with unit scale and zero shift: the kernel is about
    twice as fast given an affine than without one."""

    shape: list[int]
    eps: float
    ones: torch.Tensor
    zeros: torch.Tensor


class _Layer(NamedTuple):
    norm: _Norm | None  # a layer norm after the linear layer
    act: Activation
    gradient: ActivationGradient | None  # None: the identity


class StackedMLPChain:
    """The architecture of an :class:`MLPChain`, applied to member-stacked parameters.

    Parameters are passed as a list in :meth:`parameters` order, each stacked to
    ``(members, *shape)``; activations are ``(members, rows, features)``.
    """

    def __init__(self, chain: MLPChain) -> None:
        self.layers = [_Layer(_Norm(list(norm[0]), float(norm[3]), torch.ones_like(norm[1]),
                                    torch.zeros_like(norm[2])) if norm is not None else None,
                              act, activation_gradient(act))
                       for _, _, norm, act in chain.plan]

    @classmethod
    def of(cls, chain: MLPChain) -> StackedMLPChain | None:
        """The stacked form of ``chain``, or None when one of its activations has no
        backward here."""
        if not all(covered(act) for _, _, _, act in chain.plan):
            return None
        return cls(chain)

    @staticmethod
    def parameters(chain: MLPChain) -> list[torch.Tensor]:
        """One member's parameters in stacking order: per layer its weight and bias, then
        its layer norm's weight and bias when it has one."""
        params: list[torch.Tensor] = []
        for weight, bias, norm, _ in chain.plan:
            params += [weight, bias]
            if norm is not None:
                params += [norm[1], norm[2]]
        return params

    @torch.no_grad()
    def forward(self, params: Sequence[torch.Tensor], x: torch.Tensor,
                tape: StackedTape | None = None) -> torch.Tensor:
        """Every member's output for its rows of ``x`` (``(members, rows, in)``); with
        ``tape`` (a list), what :meth:`backward` needs is appended to it."""
        i = 0
        for layer in self.layers:
            pre = torch.baddbmm(params[i + 1].unsqueeze(1), x, params[i].transpose(1, 2))
            i += 2
            normed = mean = rstd = None
            out = pre
            if layer.norm is not None:
                norm = layer.norm
                normed, mean, rstd = torch.native_layer_norm(pre, norm.shape, norm.ones,
                                                             norm.zeros, norm.eps)
                out = torch.addcmul(params[i + 1].unsqueeze(1), normed, params[i].unsqueeze(1))
                i += 2
            act_in, out = out, layer.act(out)
            if tape is not None:  # only what the backward reads: the rest is freed early
                reads_input = layer.gradient is not None and layer.gradient.reads_input
                tape.append((x, pre if normed is not None else None, normed, mean, rstd,
                             act_in if reads_input else None, out))
            x = out
        return x

    @torch.no_grad()
    def backward(self, params: Sequence[torch.Tensor], tape: StackedTape,
                 grad: torch.Tensor, keep: GradientKeeper | None = None
                 ) -> list[torch.Tensor]:
        """The gradients (stacked, in ``params`` order) of ``sum(grad * output)``, the
        output being the one :meth:`forward` recorded in ``tape`` with ``params``;
        ``keep`` receives each layer's gradient w.r.t. its pre-activation."""
        grads: list[torch.Tensor | None] = [None] * len(params)
        i = len(params)
        for index in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[index]
            x, pre, normed, mean, rstd, act_in, out = tape[index]
            if (gradient := layer.gradient) is not None:
                saved = act_in if gradient.reads_input else out
                assert saved is not None  # the forward kept what this backward reads
                grad = gradient.backward(grad, saved)
            if keep is not None:
                keep(index, grad)
            if layer.norm is not None:
                i -= 2
                assert normed is not None  # kept for every layer with a norm
                grads[i] = (grad * normed).sum(1)
                grads[i + 1] = grad.sum(1)
                grad = LAYER_NORM_BACKWARD(grad * params[i].unsqueeze(1), pre, layer.norm.shape,
                                            mean, rstd, None, None, [True, False, False])[0]
            i -= 2
            grads[i] = torch.bmm(grad.transpose(1, 2), x)
            grads[i + 1] = grad.sum(1)
            if index:
                grad = torch.bmm(grad, params[i])
        return cast("list[torch.Tensor]", grads)  # every slot was set above
