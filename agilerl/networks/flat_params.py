"""An online network, its target network (if any) and its Adam state, each in one flat buffer.

On the small networks of the offline (CQN) and DQN updates, gradient-norm clipping, the
Adam step and the soft target update cost one kernel launch (and its Python bookkeeping)
per parameter tensor, more than their arithmetic. :class:`FlatTraining` moves the
parameters of each network into one contiguous buffer (every ``Parameter`` keeps its
identity; its ``.data`` becomes a view of the buffer), and likewise the gradients and
Adam's two moment estimates, so each of the three becomes one or two kernels over the
whole network. Adam and the soft update are elementwise, so their results are bitwise
those of the per-tensor kernels; the clip's norm is summed in another order (float
rounding only).

The optimizer's per-parameter state stays what :class:`~agilerl.networks.optim.Adam`
expects (its entries are views of the flat moments; parameters with equal step counts
share one counter), so ``state_dict``, checkpoints and resume are unchanged. A :class:`FlatTraining` is bound to
the network, target and optimizer objects (and the optimizer's state dict) it was built
from; :meth:`FlatTraining.bound_to` says when any of them has been replaced (a mutation or
a load) and it must be built again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch

from agilerl.networks.optim import Adam


class Parametrised(Protocol):
    """What the buffers are built over: a module, or several seen as one."""

    def parameters(self) -> Iterator[torch.Tensor]: ...


class FlatTraining:
    """Flat parameters, gradients and Adam moments of ``online`` and ``target`` (None for a
    network trained without a target network, as PPO's).

    The buffers carry no autograd history, so the updates below need no ``no_grad``
    context."""

    def __init__(self, online: Parametrised, target: Parametrised | None, optimizer: Adam,
                 params: list[torch.Tensor], target_params: list[torch.Tensor]) -> None:
        self.online, self.target, self.optimizer = online, target, optimizer
        self.params, self.target_params = params, target_params
        self.flat = _flatten(params)
        self.target_flat = _flatten(target_params) if target_params else None
        self.grad = torch.zeros_like(self.flat)
        self.grads = _views(self.grad, params)
        #: Parameter id -> its view of the flat gradient (what closed-form backwards write).
        self.grad_views = {id(p): g for p, g in zip(params, self.grads, strict=True)}
        self.exp_avg, self.exp_avg_sq, self.counters, runs = _flat_adam_state(optimizer, params)
        # One Adam tensor list entry per run of parameters with the same step count (one
        # run, unless a mutation added parameters that have taken fewer steps).
        self._adam_lists = [[flat[a:b] for a, b in runs]
                            for flat in (self.flat, self.grad, self.exp_avg, self.exp_avg_sq)]
        self.state = optimizer.state
        self.fresh = False  # set by whoever wrote a gradient into ``grad`` not yet applied
        self.attach_grads()

    @classmethod
    def build(cls, online: Parametrised, target: Parametrised | None, optimizer: object
              ) -> FlatTraining | None:
        """The flat buffers of ``online`` (stepped by ``optimizer``, one Adam group over
        exactly its parameters, in order) and ``target`` (the same shapes, or None); None
        when they do not fit that pattern, or Adam's state is not uniform (some parameters
        without state, or step counts that differ)."""
        if not isinstance(optimizer, Adam) or len(optimizer.param_groups) != 1:
            return None
        params = list(online.parameters())
        target_params = list(target.parameters()) if target is not None else []
        if [id(p) for p in optimizer.param_groups[0]["params"]] != [id(p) for p in params]:
            return None
        if target is not None and [p.shape for p in params] != [p.shape for p in target_params]:
            return None
        first = params[0]
        if any(p.dtype != first.dtype or p.device != first.device
               for p in (*params, *target_params)):
            return None
        return cls(online, target, optimizer, params, target_params)

    @classmethod
    def current(cls, flat: FlatTraining | None, online: Parametrised, target: Parametrised | None,
                optimizer: Adam) -> FlatTraining | None:
        """``flat`` while it is still bound to ``online``, ``target`` and ``optimizer``;
        otherwise buffers built afresh for them (:meth:`build`, None where they do not
        fit)."""
        if flat is not None and flat.bound_to(online, target, optimizer):
            return flat
        return cls.build(online, target, optimizer)

    def bound_to(self, online: Parametrised, target: Parametrised | None, optimizer: Adam) -> bool:
        """Whether these buffers are still those of ``online``, ``target`` and
        ``optimizer`` (none replaced, no parameter moved off its view)."""
        return (online is self.online and target is self.target
                and optimizer is self.optimizer and optimizer.state is self.state
                and self.params[0].data_ptr() == self.flat.data_ptr()
                and (self.target_flat is None
                     or self.target_params[0].data_ptr() == self.target_flat.data_ptr()))

    def attach_grads(self) -> None:
        """Make every parameter's ``.grad`` its view of the flat gradient (a
        ``zero_grad(set_to_none=True)`` detaches them)."""
        if self.params[0].grad is not self.grads[0]:
            for p, g in zip(self.params, self.grads, strict=True):
                p.grad = g

    def clip_grad_norm(self, max_norm: float) -> None:
        """Scale the gradient so that its L2 norm is at most ``max_norm``."""
        total = float(torch.linalg.vector_norm(self.grad))
        scale = max_norm / (total + 1e-6)
        if scale < 1.0:
            self.grad.mul_(scale)

    def adam_step(self) -> None:
        """One step of the optimizer's Adam (its group's lr, betas and eps) on the flat
        gradient."""
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        for counter in self.counters:
            counter.add_(1.0)
        params, grads, avgs, sqs = self._adam_lists
        torch._fused_adam_(params, grads, avgs, sqs, [], self.counters, lr=group["lr"],
                           beta1=beta1, beta2=beta2, weight_decay=0.0, eps=group["eps"],
                           amsgrad=False, maximize=False)

    def soft_update(self, tau: float) -> None:
        """target <- tau * online + (1 - tau) * target."""
        assert self.target_flat is not None, "built without a target network"
        self.target_flat.lerp_(self.flat, tau)


#: Where each parameter's view starts: on a 64-byte boundary, as a tensor of its own does.
#: Matrix kernels choose their vector paths by alignment, so a view at any offset can
#: round differently from the tensor it replaced (an agent restored from a checkpoint
#: would then act differently in the last bit until it builds its own flat buffers).
ALIGN_BYTES = 64


def _offsets(like: list[torch.Tensor]) -> tuple[list[int], int]:
    """The start of each tensor of ``like`` in a flat buffer, and the buffer's size."""
    step = max(1, ALIGN_BYTES // like[0].element_size())
    offsets, end = [], 0
    for p in like:
        start = -(-end // step) * step
        offsets.append(start)
        end = start + p.numel()
    return offsets, end


def _gather(tensors: list[torch.Tensor], like: list[torch.Tensor]) -> torch.Tensor:
    """One buffer holding ``tensors`` at the offsets of ``like`` (zeros between them)."""
    offsets, size = _offsets(like)
    flat = torch.zeros(size, dtype=like[0].dtype, device=like[0].device)
    for tensor, start in zip(tensors, offsets, strict=True):
        flat[start:start + tensor.numel()] = tensor.reshape(-1)
    return flat


def _flatten(params: list[torch.Tensor]) -> torch.Tensor:
    """One buffer holding the values of ``params``, which become views of it."""
    flat = _gather([p.detach() for p in params], params)
    for p, view in zip(params, _views(flat, params), strict=True):
        p.data = view
    return flat


def _views(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    offsets, _ = _offsets(like)
    return [flat[start:start + p.numel()].view_as(p)
            for p, start in zip(like, offsets, strict=True)]


def _flat_adam_state(optimizer: Adam, params: list[torch.Tensor]
                     ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor],
                                list[tuple[int, int]]]:
    """Adam's flat moments for ``params`` and one step counter per run of parameters
    with equal step counts (with the flat ranges of those runs), holding the current
    state's values; a parameter without state (before its first step) gets what Adam's
    first step would give it, zero moments and a zero count. The result is installed as
    the optimizer's state in a new dict, so whoever cached the old state's tensors sees
    that they were replaced."""
    old = optimizer.state
    exp_avg = _gather([_moment(old.get(p), "exp_avg", p) for p in params], params)
    exp_avg_sq = _gather([_moment(old.get(p), "exp_avg_sq", p) for p in params], params)
    counters: list[torch.Tensor] = []
    runs: list[tuple[int, int]] = []
    steps: list[torch.Tensor] = []
    last = None
    for p, start in zip(params, _offsets(params)[0], strict=True):
        entry = old.get(p)
        count = float(entry["step"]) if entry else 0.0
        if count != last:
            counters.append(torch.tensor(count, dtype=torch.float32, device=p.device))
            runs.append((start, start))
            last = count
        runs[-1] = (runs[-1][0], start + p.numel())  # (the gaps between stay zero)
        steps.append(counters[-1])
    optimizer.state = {
        p: {"step": step, "exp_avg": avg, "exp_avg_sq": sq}
        for p, step, avg, sq in zip(params, steps, _views(exp_avg, params),
                                    _views(exp_avg_sq, params), strict=True)
    }
    return exp_avg, exp_avg_sq, counters, runs


def _moment(entry: dict[str, torch.Tensor] | None, key: str, param: torch.Tensor
            ) -> torch.Tensor:
    if entry:
        return entry[key].detach().reshape(-1).to(param.dtype)
    return torch.zeros(param.numel(), dtype=param.dtype, device=param.device)
