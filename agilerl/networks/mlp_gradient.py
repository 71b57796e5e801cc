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
head) with ReLU, Tanh, Sigmoid or no activation, with or without layer norm, on 2-D
batches. :meth:`MLPChain.of` returns None for any other network, and callers fall back to
autograd.
"""

from __future__ import annotations

from typing import Any

import torch

from agilerl.modules.mlp import EvolvableMLP, measured_slots

#: The layer-norm backward kernel autograd itself calls.
LAYER_NORM_BACKWARD = torch.ops.aten.native_layer_norm_backward.default

#: Activation (as the MLP's plan holds it) -> gradient through it from its output.
ACTIVATION_BACKWARD: dict[Any, Any] = {
    torch.relu: lambda grad, out: torch.ops.aten.threshold_backward.default(grad, out, 0),
    torch.tanh: torch.ops.aten.tanh_backward.default,
    torch.sigmoid: torch.ops.aten.sigmoid_backward.default,
}

_ALL_THREE = [True, True, True]

#: Activation -> the same activation applied in place (identity: None).
_IN_PLACE: dict[Any, Any] = {torch.relu: torch.relu_, torch.tanh: torch.tanh_,
                             torch.sigmoid: torch.sigmoid_}

#: Per layer: (input, pre-norm value, norm mean, norm rstd, activation output).
Tape = list[tuple[torch.Tensor, Any, Any, Any, Any]]


class MLPChain:
    """The layers of ``mlps`` applied in order, with a recorded forward and its backward."""

    def __init__(self, mlps: list[EvolvableMLP]) -> None:
        self.mlps = mlps
        self.plan = [layer for mlp in mlps
                     for layer in (mlp.__dict__.get("_plan") or mlp._make_plan())]
        self.parameters = [p for mlp in mlps for p in mlp.parameters()]
        #: Per layer of :attr:`plan`: where its pre-activation gradient is kept (ReGraMa).
        self.measured = measured_slots(mlps)

    @classmethod
    def of(cls, network: Any) -> MLPChain | None:
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
        from agilerl.modules.mlp import _identity

        if any(act is not _identity and act not in ACTIVATION_BACKWARD
               for _, _, _, act in chain.plan):
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
        for weight_t, bias, norm, act, _, _ in self._layers():
            pre = torch.addmm(bias, x, weight_t)  # what F.linear computes, one kernel
            if norm is not None:
                out, mean, rstd = torch.native_layer_norm(pre, *norm)
            else:
                out, mean, rstd = pre, None, None
            if act is not None:  # in place: ``out`` is this layer's own new tensor
                act(out)
            if tape is not None:
                tape.append((x, pre if norm is not None else None, mean, rstd, out))
            x = out
        return x

    def _layers(self) -> list[tuple[Any, ...]]:
        """Per layer of :attr:`plan`, with every parameter detached: (transposed weight,
        bias, layer-norm args, in-place activation, weight, activation's backward). Rebuilt
        when the parameters' storage was replaced (see ``flat_params``)."""
        key = self.plan[0][0].data_ptr()
        if self.__dict__.get("_layers_key") != key:
            self._layers_key = key
            self._layers_cache = [
                (weight.detach().t(), bias.detach(),
                 None if norm is None else (norm[0], norm[1].detach(), norm[2].detach(),
                                            norm[3]),
                 _IN_PLACE.get(act), weight.detach(), ACTIVATION_BACKWARD.get(act))
                for weight, bias, norm, act in self.plan]
            self._backward_order = list(enumerate(self._layers_cache))[::-1]
        return self._layers_cache

    @torch.no_grad()
    def backward(self, tape: Tape, grad: torch.Tensor,
                 into: list[tuple[Any, ...]] | None = None) -> None:
        """Set ``.grad`` of every parameter to the gradient of ``sum(grad * output)``,
        the output being the one :meth:`forward` recorded in ``tape``.

        ``into`` (per layer of :attr:`plan`: the weight's, bias's, norm weight's and norm
        bias's gradient tensors, see :meth:`gradient_slots`) receives the gradients in
        place instead: see :meth:`backward_into`.
        """
        if into is not None:
            self.backward_into(tape, grad, into)
            return
        for i in range(len(self.plan) - 1, -1, -1):
            weight, bias, norm, act = self.plan[i]
            x, pre, mean, rstd, out = tape[i]
            activation_backward = ACTIVATION_BACKWARD.get(act)
            if activation_backward is not None:
                grad = activation_backward(grad, out)
            if (measured := self.measured[i]) is not None:
                measured[0].keep_gradient(measured[1], grad)
            if norm is not None:
                grad, norm[1].grad, norm[2].grad = LAYER_NORM_BACKWARD(
                    grad, pre, norm[0], mean, rstd, norm[1], norm[2], [True, True, True])
            weight.grad = torch.mm(grad.t(), x)
            bias.grad = grad.sum(0)
            if i:
                grad = torch.mm(grad, weight)

    def backward_into(self, tape: Tape, grad: torch.Tensor, into: list[tuple[Any, ...]]
                      ) -> None:
        """:meth:`backward` writing into the tensors ``into``, without a ``no_grad``
        wrapper (no parameter is read attached); ``grad`` must carry no graph."""
        self._layers()
        for i, (_, _, norm, _, weight, activation_backward) in self._backward_order:
            x, pre, mean, rstd, out = tape[i]
            if activation_backward is not None:
                grad = activation_backward(grad, out)
            if (measured := self.measured[i]) is not None:
                measured[0].keep_gradient(measured[1], grad)
            weight_grad, bias_grad, norm_weight_grad, norm_bias_grad = into[i]
            if norm is not None:
                grad, norm_weight, norm_bias = LAYER_NORM_BACKWARD(
                    grad, pre, norm[0], mean, rstd, norm[1], norm[2], _ALL_THREE)
                norm_weight_grad.copy_(norm_weight)
                norm_bias_grad.copy_(norm_bias)
            torch.mm(grad.t(), x, out=weight_grad)
            torch.sum(grad, 0, out=bias_grad)
            if i:
                grad = torch.mm(grad, weight)

    def gradient_slots(self, grads: dict[int, torch.Tensor]) -> list[tuple[Any, ...]]:
        """``into`` for :meth:`backward` from ``grads`` (``id(parameter)`` -> its gradient
        tensor)."""
        return [(grads[id(weight)], grads[id(bias)],
                 grads[id(norm[1])] if norm is not None else None,
                 grads[id(norm[2])] if norm is not None else None)
                for weight, bias, norm, _ in self.plan]


def cached_chain(owner: Any, network: Any, key: str = "_mlp_chain") -> MLPChain | None:
    """``MLPChain.of(network)``, cached on ``owner`` (under ``key``, one per network the
    owner keeps) until ``network`` is replaced (a mutation or a load builds new modules)."""
    cache = owner.__dict__.get(key)
    if cache is None or cache[0] is not network:
        cache = (network, MLPChain.of(network))
        owner.__dict__[key] = cache
    return cache[1]
