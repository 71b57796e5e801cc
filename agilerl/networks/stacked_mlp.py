"""Several same-architecture MLPs run as one: member-stacked parameters, grouped matmuls.

The batched population updates (:mod:`agilerl.algorithms.stacked_update`,
:mod:`agilerl.algorithms.stacked_ppo`) stack the parameters of members whose networks
share one architecture along a leading member dimension and run every member's network in
one pass: one ``baddbmm`` per linear layer over ``(members, rows, features)`` activations.
The forward here is differentiable (autograd through the stacks); the closed-form gradient
of the same chain is :class:`~agilerl.networks.stacked_mlp_gradient.StackedMLPChain`.

Grouped matmuls rather than ``torch.func.vmap(functional_call(...))``: the MLPs call
``F.linear`` on cached parameter references (their fast acting path), which
``functional_call`` cannot swap, and one ``baddbmm`` per layer has less dispatch overhead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import torch
import torch.nn.functional as F

from agilerl.modules.mlp import Activation, EvolvableMLP, LayerPlan, measured_slots


class StackedLayer(NamedTuple):
    """What a linear layer does besides its matrix product."""

    norm: tuple[tuple[int, ...], float] | None  # layer norm after it: (shape, eps)
    act: Activation  # the activation (a function)


def _plan(mlp: EvolvableMLP) -> list[LayerPlan]:
    """(weight, bias, layer-norm args or None, activation) per layer of ``mlp``."""
    return mlp.__dict__.get("_plan") or mlp._make_plan()


def stacked_layers(mlps: Sequence[EvolvableMLP]) -> list[StackedLayer]:
    """The layers of ``mlps`` applied one after another, as :func:`stacked_forward` takes
    them."""
    return [StackedLayer((tuple(norm[0]), float(norm[3])) if norm is not None else None, act)
            for mlp in mlps for _, _, norm, act in _plan(mlp)]


def layer_parameters(mlps: Sequence[EvolvableMLP]) -> list[torch.Tensor]:
    """One member's parameters of ``mlps`` in stacking order: per layer its weight and bias,
    then its layer norm's weight and bias when it has one."""
    params: list[torch.Tensor] = []
    for mlp in mlps:
        for weight, bias, norm, _ in _plan(mlp):
            params += [weight, bias]
            if norm is not None:
                params += [norm[1], norm[2]]
    return params


def stacked_forward(layers: Sequence[StackedLayer], params: Sequence[torch.Tensor],
                    x: torch.Tensor, keep: GradientKeeper | None = None) -> torch.Tensor:
    """Every member's output for its rows of ``x`` (``(members, rows, in)``), the networks
    being ``layers`` with the member-stacked ``params`` (in :func:`layer_parameters`
    order, each ``(members, *shape)``). Under autograd, ``keep`` (see
    :func:`gradient_keeper`) receives each layer's gradient w.r.t. its pre-activation."""
    i = 0
    for index, layer in enumerate(layers):
        weight, bias = params[i], params[i + 1]
        x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
        i += 2
        if layer.norm is not None:
            shape, eps = layer.norm
            x = (F.layer_norm(x, shape, None, None, eps) * params[i].unsqueeze(1)
                 + params[i + 1].unsqueeze(1))
            i += 2
        if keep is not None and x.requires_grad:
            x.register_hook(partial(keep, index))
        x = layer.act(x)
    return x


#: Called with a layer's index (in :func:`stacked_layers` order) and its stacked gradient
#: w.r.t. the pre-activation, ``(members, rows, features)``.
GradientKeeper = Callable[[int, torch.Tensor], None]


def gradient_keeper(member_mlps: Sequence[Sequence[EvolvableMLP]],
                    rows: Sequence[int] | None = None) -> GradientKeeper:
    """A :data:`GradientKeeper` handing each member its slice of a stacked pass's gradients
    (its first ``rows[g]`` rows: the others pad a shorter batch) through
    ``EvolvableMLP.keep_gradient``, as its own update would (for ReGraMa).
    ``member_mlps[g]``: member ``g``'s MLPs, in the order the stacked layers run them."""
    slots = [measured_slots(mlps) for mlps in member_mlps]

    def keep(layer: int, gradient: torch.Tensor) -> None:
        for g, member in enumerate(slots):
            if (slot := member[layer]) is not None:
                own = gradient[g] if rows is None else gradient[g, : rows[g]]
                slot[0].keep_gradient(slot[1], own)

    return keep
