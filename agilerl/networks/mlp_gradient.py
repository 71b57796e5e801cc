"""Gradients of an MLP chain (an MLP encoder feeding an MLP head) in closed form.

On the small networks of the offline (CQN) and bandit updates -- a batch of 64-256 rows
through two 64-128 wide layers -- the autograd engine's bookkeeping (graph nodes, saved
tensors, scheduling) costs more than the arithmetic. :class:`MLPChain` runs the forward
pass without autograd, keeping what each layer's backward formula needs (its input, the
pre-norm values and the layer norm's statistics, the activation's output), and applies
the chain rule layer by layer with the kernels autograd itself calls (``mm``,
``native_layer_norm_backward``, ``threshold_backward``...). Gradients therefore equal
autograd's up to float rounding; the maths of the update is unchanged.

Supported: :class:`~agilerl.modules.mlp.EvolvableMLP` layers (an ``MLPEncoder`` and a
head) with ReLU, Tanh, Sigmoid, ELU, GELU, LeakyReLU, Softplus or no activation (every
activation an activation mutation draws by default), with or without layer norm, on 2-D
batches. :meth:`MLPChain.of` returns None for any other network, and callers fall back to
autograd.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeAlias, TypeVar, overload

import torch
from torch import nn

from agilerl.modules.mlp import (
    Activation,
    EvolvableMLP,
    LayerPlan,
    NormArgs,
    _identity,
    measured_slots,
)

#: A closed-form chain kind (:class:`MLPChain`, or another module's built on it).
ChainT = TypeVar("ChainT")

#: The layer-norm backward kernel autograd itself calls.
LAYER_NORM_BACKWARD = torch.ops.aten.native_layer_norm_backward.default
_ATEN = torch.ops.aten

#: An activation's backward: (gradient at its output, the tensor the tape saved for it)
#: -> gradient at its input.
Backward: TypeAlias = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: Per layer: the gradient tensors of its weight, bias, norm weight and norm bias (the
#: last two None without a layer norm).
GradientSlots: TypeAlias = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                                 torch.Tensor | None]

#: Activation (as the MLP's plan holds it) -> gradient through it from its output.
ACTIVATION_BACKWARD: dict[Activation, Backward] = {
    torch.relu: lambda grad, out: _ATEN.threshold_backward.default(grad, out, 0),
    torch.tanh: _ATEN.tanh_backward.default,
    torch.sigmoid: _ATEN.sigmoid_backward.default,
}


class ActivationGradient(NamedTuple):
    """How the closed form differentiates an activation."""

    backward: Backward  # grad, the saved tensor -> gradient at the activation's input
    reads_input: bool  # the saved tensor is the activation's input (else its output)


def _from_input(act: Activation) -> Backward | None:
    """The backward, from its input, of the activation modules an MLP keeps as modules
    (ELU and GELU, which an activation mutation draws; LeakyReLU, Softplus), with the
    kernels autograd calls for them; None for any other."""
    if type(act) is nn.GELU:
        return lambda grad, x: _ATEN.gelu_backward.default(grad, x, approximate=act.approximate)
    if type(act) is nn.ELU:
        return lambda grad, x: _ATEN.elu_backward.default(grad, act.alpha, 1, 1, False, x)
    if type(act) is nn.LeakyReLU:
        return lambda grad, x: _ATEN.leaky_relu_backward.default(grad, x, act.negative_slope,
                                                                 False)
    if type(act) is nn.Softplus:
        return lambda grad, x: _ATEN.softplus_backward.default(grad, x, act.beta,
                                                               act.threshold)
    return None


def activation_gradient(act: Activation) -> ActivationGradient | None:
    """The closed form's backward of the activation ``act`` (as an MLP plan holds it);
    None for the identity and for activations it does not cover."""
    from_output = ACTIVATION_BACKWARD.get(act)
    if from_output is not None:
        return ActivationGradient(from_output, False)
    from_input = _from_input(act)
    return None if from_input is None else ActivationGradient(from_input, True)


def covered(act: Activation) -> bool:
    """Whether the closed form has a backward for the activation ``act``."""
    return act is _identity or activation_gradient(act) is not None


_ALL_THREE = [True, True, True]
_INPUT_ONLY = [True, False, False]

#: Activation -> the same activation applied in place (identity: None).
_IN_PLACE: dict[Activation, Activation] = {torch.relu: torch.relu_, torch.tanh: torch.tanh_,
                             torch.sigmoid: torch.sigmoid_}

#: Per layer: (input, pre-norm value, norm mean, norm rstd, what the activation's
#: backward reads: its output, or its input for the activations kept as modules).
Tape = list[tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None,
                  torch.Tensor]]


class _Layer(NamedTuple):
    """A layer of :attr:`MLPChain.plan` with every parameter detached."""

    weight_t: torch.Tensor
    bias: torch.Tensor
    norm: NormArgs | None  # layer-norm args, or None
    act: Activation | None  # applied out of place (None: in place by ``in_place``, or the identity)
    in_place: Activation | None  # the activation applied in place, or None
    weight: torch.Tensor
    act_backward: Backward | None  # grad, what the tape keeps -> grad (None: the identity)


class MLPChain:
    """The layers of ``mlps`` applied in order, with a recorded forward and its backward."""

    def __init__(self, mlps: list[EvolvableMLP],
                 plan: list[LayerPlan] | None = None,
                 measured: list[tuple[EvolvableMLP, int] | None] | None = None) -> None:
        """The chain of ``mlps`` run one after another. ``plan`` replaces their layers'
        (weight, bias, norm, activation) -- a noisy layer's effective weight, say, held in
        a buffer its owner keeps current -- and ``measured`` where each layer's
        pre-activation gradient is kept (default: as the MLPs measure themselves)."""
        self.mlps = mlps
        self.plan = plan if plan is not None else [
            layer for mlp in mlps for layer in (mlp.__dict__.get("_plan") or mlp._make_plan())]
        self.parameters = [p for mlp in mlps for p in mlp.parameters()]
        #: Per layer of :attr:`plan`: where its pre-activation gradient is kept (ReGraMa).
        self.measured = measured if measured is not None else measured_slots(mlps)

    @classmethod
    def of(cls, network: nn.Module) -> MLPChain | None:
        """The chain of ``network`` (one MLP encoder feeding one MLP head, and nothing
        else), or None when its gradient is not covered here."""
        encoders = getattr(network, "encoders", None)
        heads = getattr(network, "heads", None)
        if encoders is None or heads is None or len(encoders) != 1 or len(heads) != 1:
            return None
        mlps = [next(iter(encoders.values())), next(iter(heads.values()))]
        if not all(isinstance(m, EvolvableMLP) for m in mlps):
            return None
        chain = cls(mlps)
        if {id(p) for p in network.parameters()} != {id(p) for p in chain.parameters}:
            return None
        if not all(covered(act) for _, _, _, act in chain.plan):
            return None
        return chain

    @torch.no_grad()
    def forward(self, x: torch.Tensor, tape: Tape | None = None) -> torch.Tensor:
        """The chain's output for the 2-D batch ``x``; with ``tape`` (a list), what
        :meth:`backward` needs is appended to it."""
        return self.run(x, tape)

    def run(self, x: torch.Tensor, tape: Tape | None = None) -> torch.Tensor:
        """:meth:`forward` without its ``no_grad`` wrapper: every parameter is read
        detached, so no graph is recorded in any grad mode (for ``x`` without one)."""
        for layer in self._layers():
            pre = torch.addmm(layer.bias, x, layer.weight_t)  # what F.linear computes
            norm = layer.norm
            if norm is not None:
                out, mean, rstd = torch.native_layer_norm(pre, *norm)
            else:
                out, mean, rstd = pre, None, None
            kept = out
            if layer.in_place is not None:  # in place: ``out`` is this layer's own tensor
                layer.in_place(out)
            elif layer.act is not None:  # its backward reads its input, ``kept``
                out = layer.act(out)
            if tape is not None:
                tape.append((x, pre if norm is not None else None, mean, rstd, kept))
            x = out
        return x

    def _layers(self) -> list[_Layer]:
        """:attr:`plan` with every parameter detached (see :class:`_Layer`). Rebuilt when
        the parameters' storage was replaced (see ``flat_params``)."""
        key = self.plan[0][0].data_ptr()
        if self.__dict__.get("_layers_key") != key:
            self._layers_key = key
            self._layers_cache = [self._layer(*layer) for layer in self.plan]
            self._backward_order = list(enumerate(self._layers_cache))[::-1]
        return self._layers_cache

    @staticmethod
    def _layer(weight: torch.Tensor, bias: torch.Tensor, norm: NormArgs | None,
               act: Activation) -> _Layer:
        if norm is not None:
            norm = (norm[0], norm[1].detach(), norm[2].detach(), norm[3])
        # An activation whose backward reads its output runs in place (the tape keeps
        # the output); the others run out of place (the tape keeps their input).
        gradient = activation_gradient(act)
        in_place = _IN_PLACE.get(act)
        out_of_place = None if in_place is not None or act is _identity else act
        return _Layer(weight.detach().t(), bias.detach(), norm, out_of_place, in_place,
                      weight.detach(), None if gradient is None else gradient.backward)

    @torch.no_grad()
    def backward(self, tape: Tape, grad: torch.Tensor,
                 into: list[GradientSlots] | None = None) -> None:
        """Set ``.grad`` of every parameter to the gradient of ``sum(grad * output)``,
        the output being the one :meth:`forward` recorded in ``tape``.

        ``into`` (per layer of :attr:`plan`: the weight's, bias's, norm weight's and norm
        bias's gradient tensors, see :meth:`gradient_slots`) receives the gradients in
        place instead: see :meth:`backward_into`.
        """
        self._chain_rule(tape, grad, True, into, to_input=False)

    def backward_into(self, tape: Tape, grad: torch.Tensor, into: list[GradientSlots]
                      ) -> None:
        """:meth:`backward` writing into the tensors ``into``, without a ``no_grad``
        wrapper (no parameter is read attached); ``grad`` must carry no graph."""
        self._chain_rule(tape, grad, True, into, to_input=False)

    def backward_to_input(self, tape: Tape, grad: torch.Tensor, parameters: bool = True,
                          into: list[GradientSlots] | None = None) -> torch.Tensor:
        """The gradient of ``sum(grad * output)`` with respect to the chain's input (the
        output being the one :meth:`forward` recorded in ``tape``); ``grad`` must carry no
        graph (no parameter is read attached, so no ``no_grad`` context is needed).

        With ``parameters``, every parameter's gradient also goes to its ``.grad``, or into
        ``into`` (as in :meth:`backward`); without, the parameters are treated as frozen.
        The pre-activation gradients ReGraMa keeps are recorded either way, as an autograd
        pass records them."""
        grad_in = self._chain_rule(tape, grad, parameters, into, to_input=True)
        assert grad_in is not None
        return grad_in

    def _chain_rule(self, tape: Tape, grad: torch.Tensor, parameters: bool,
                    into: list[GradientSlots] | None, to_input: bool) -> torch.Tensor | None:
        """The one backward loop behind :meth:`backward`, :meth:`backward_into` and
        :meth:`backward_to_input` (``to_input``: also the first layer's input gradient)."""
        self._layers()
        for i, layer in self._backward_order:
            x, pre, mean, rstd, kept = tape[i]
            if layer.act_backward is not None:
                grad = layer.act_backward(grad, kept)
            if (measured := self.measured[i]) is not None:
                measured[0].keep_gradient(measured[1], grad)
            weight, bias, norm, _ = self.plan[i]
            if norm is not None:
                assert layer.norm is not None  # its detached copy
                grad, norm_weight_grad, norm_bias_grad = LAYER_NORM_BACKWARD(
                    grad, pre, norm[0], mean, rstd, layer.norm[1], layer.norm[2],
                    _ALL_THREE if parameters else _INPUT_ONLY)
                if into is not None:
                    norm_weight_slot, norm_bias_slot = into[i][2], into[i][3]
                    assert norm_weight_slot is not None and norm_bias_slot is not None  # a norm's
                    norm_weight_slot.copy_(norm_weight_grad)
                    norm_bias_slot.copy_(norm_bias_grad)
                elif parameters:
                    norm[1].grad, norm[2].grad = norm_weight_grad, norm_bias_grad
            if into is not None:
                torch.mm(grad.t(), x, out=into[i][0])
                torch.sum(grad, 0, out=into[i][1])
            elif parameters:
                weight.grad = torch.mm(grad.t(), x)
                bias.grad = grad.sum(0)
            if i or to_input:
                grad = torch.mm(grad, layer.weight)
        return grad if to_input else None

    def gradient_slots(self, grads: dict[int, torch.Tensor]) -> list[GradientSlots]:
        """``into`` for :meth:`backward` from ``grads`` (``id(parameter)`` -> its gradient
        tensor), kept while the same map is passed (a flat buffer's gradient views, see
        ``FlatTraining.grad_views``, are one map for the buffer's life)."""
        cached = self.__dict__.get("_slots")
        if cached is None or cached[0] is not grads:
            cached = self._slots = (grads, [
                (grads[id(weight)], grads[id(bias)],
                 grads[id(norm[1])] if norm is not None else None,
                 grads[id(norm[2])] if norm is not None else None)
                for weight, bias, norm, _ in self.plan])
        return cached[1]


def first_rows(tape: Tape, rows: int) -> Tape:
    """``tape`` as if its forward pass had seen only the first ``rows`` rows of its batch
    (rows are independent through every layer, layer norm included), for a backward pass
    through only those rows."""
    return [(x[:rows], None if pre is None else pre[:rows],
             None if mean is None else mean[:rows], None if rstd is None else rstd[:rows],
             kept[:rows]) for x, pre, mean, rstd, kept in tape]


@overload
def cached_chain(owner: object, network: nn.Module, key: str = ...) -> MLPChain | None: ...


@overload
def cached_chain(owner: object, network: nn.Module, key: str,
                 of: Callable[[nn.Module], ChainT | None]) -> ChainT | None: ...


def cached_chain(owner: object, network: nn.Module, key: str = "_mlp_chain",
                 of: Callable[[nn.Module], object] = MLPChain.of) -> object:
    """``of(network)`` (default ``MLPChain.of``: a network's closed-form chain, or None),
    cached on ``owner`` (under ``key``, one per network the owner keeps) until ``network``
    is replaced (a mutation or a load builds new modules)."""
    cache = owner.__dict__.get(key)
    if cache is None or cache[0] is not network:
        cache = (network, of(network))
        owner.__dict__[key] = cache
    return cache[1]
