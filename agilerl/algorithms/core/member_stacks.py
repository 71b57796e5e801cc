"""Member-stacked parameters, and each member's own optimizer step on its slice of them.

Shared by the batched population updates (:mod:`.stacked_update` for DQN and CQN,
:mod:`.stacked_ppo` for PPO): the members' parameters are copied into stacks (one leading
member dimension) for the grouped forward and backward; each member then steps its *own*
optimizer on its slice of the stacked gradient, so learning rates, Adam moments and step
counts stay per member (they differ after hyperparameter mutation) and checkpoints,
cloning and mutation see ordinary agents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from agilerl.networks.optim import Adam


class MemberStacks:
    """Parameter sets of a group's members, stacked: ``sets[k][m]`` is member ``m``'s list
    of set ``k`` (e.g. online and target parameters), every member's lists alike in shape.
    Stacks of set ``k`` are leaves with gradients when ``requires_grad[k]``."""

    def __init__(self, sets: Sequence[Sequence[Sequence[torch.Tensor]]],
                 requires_grad: Sequence[bool]) -> None:
        self.sets = [[list(params) for params in members] for members in sets]
        self.requires_grad = list(requires_grad)
        self.members = len(self.sets[0])
        # Stacks of the whole group, refreshed in place by one foreach copy when every
        # member takes part (the usual case) instead of one stack per parameter tensor.
        self._whole = [[torch.stack([p[i].detach() for p in members]).requires_grad_(grad)
                        for i in range(len(members[0]))]
                       for members, grad in zip(self.sets, self.requires_grad, strict=True)]
        rows = range(self.members)
        self._slots = [stack.detach()[g] for stacks in self._whole for g in rows
                       for stack in stacks]
        self._sources = [p for members in self.sets for params in members for p in params]

    @torch.no_grad()
    def gather(self, members: Sequence[int]) -> list[list[torch.Tensor]]:
        """Per set, the stacks of ``members`` (in that order) holding their current values;
        leaves with gradients have none yet."""
        if list(members) == list(range(self.members)):
            torch._foreach_copy_(self._slots, self._sources)
            for stacks in self._whole:
                for stack in stacks:
                    stack.grad = None
            return self._whole
        out = []
        for params, grad in zip(self.sets, self.requires_grad, strict=True):
            out.append([torch.stack([params[m][i] for m in members]).requires_grad_(grad)
                        for i in range(len(params[0]))])
        return out


@torch.no_grad()
def clip_member_grads(stacked: Sequence[torch.Tensor | None],
                      max_norm: float | torch.Tensor) -> None:
    """Scale each member's slice of the ``stacked`` gradients so that its joint L2 norm is
    at most ``max_norm`` (a number, or one per member): what
    :func:`~agilerl.algorithms.core.target.clip_grad_norm` does for each member."""
    grads = [grad for grad in stacked if grad is not None]
    if not grads:
        return
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])
    total = torch.linalg.vector_norm(norms, dim=0)
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for grad in grads:
        grad.mul_(scale.reshape(-1, *([1] * (grad.dim() - 1))))


class MemberAdams:
    """Every member's own Adam step on its slice of stacked gradients: the maths of its
    ``optimizer.step()``, bit for bit (the same fused kernel), with one kernel call per
    distinct (lr, betas, eps). Keyed by member index, for one group while it lives."""

    def __init__(self) -> None:
        self._cache: dict[int, _AdamLists] = {}

    @torch.no_grad()
    def step(self, entries: Sequence[tuple[int, Adam, list[torch.Tensor],
                                           list[torch.Tensor | None]]]) -> None:
        """``entries``: per member ``(index, optimizer, parameters, gradients)``, the
        gradients being slices of stacked ones, in ``parameters`` order."""
        fused: dict[tuple[float, tuple[float, float], float],
                    list[tuple[_AdamLists, list[torch.Tensor]]]] = {}
        for m, optimizer, params, grads in entries:
            ready = all(grad is not None for grad in grads)
            lists = self._lists(m, optimizer, params) if ready else None
            if lists is not None:
                group = optimizer.param_groups[0]
                fused.setdefault((group["lr"], group["betas"], group["eps"]), []).append(
                    (lists, grads))  # type: ignore[arg-type]
                continue
            # its own step (its first one: Adam creates its state): on the stacked slices,
            # then the parameters get their own gradient tensors back (a member may keep
            # them as views of a buffer of its own)
            own = [param.grad for param in params]
            for param, grad in zip(params, grads, strict=True):
                param.grad = grad
            optimizer.step()
            for param, grad in zip(params, own, strict=True):
                param.grad = grad
        for (lr, (beta1, beta2), eps), members in fused.items():
            _fused_step(members, lr, beta1, beta2, eps)

    def _lists(self, m: int, optimizer: Adam, params: list[torch.Tensor]) -> _AdamLists | None:
        """Member ``m``'s Adam tensors for one fused step, or None when its ``step`` must
        run instead (another optimizer, or state not yet created: its first step)."""
        cached = self._cache.get(m)
        if cached is not None and cached.state is optimizer.state:
            return cached
        if not _adam_ready(optimizer, params):
            return None
        states = [optimizer.state[p] for p in params]
        steps = [state["step"] for state in states]
        lists = _AdamLists(optimizer.state, params, [state["exp_avg"] for state in states],
                           [state["exp_avg_sq"] for state in states], steps,
                           list({id(step): step for step in steps}.values()))
        self._cache[m] = lists
        return lists


def _fused_step(members: list[tuple[_AdamLists, list[torch.Tensor]]], lr: float,
                beta1: float, beta2: float, eps: float) -> None:
    params: list[torch.Tensor] = []
    grads: list[torch.Tensor] = []
    avgs: list[torch.Tensor] = []
    sqs: list[torch.Tensor] = []
    steps: list[torch.Tensor] = []
    for lists, member_grads in members:
        for counter in lists.counters:
            counter.add_(1.0)
        params += lists.params
        grads += member_grads
        avgs += lists.avgs
        sqs += lists.sqs
        steps += lists.steps
    torch._fused_adam_(params, grads, avgs, sqs, [], steps, lr=lr, beta1=beta1, beta2=beta2,
                       weight_decay=0.0, eps=eps, amsgrad=False, maximize=False)


def _adam_ready(optimizer: object, params: Sequence[torch.Tensor]) -> bool:
    """Whether one fused Adam call may step ``params`` for ``optimizer`` (an
    :class:`~agilerl.networks.optim.Adam` over exactly them, with state for each): what
    its ``step`` would do then is that one kernel."""
    if not isinstance(optimizer, Adam) or len(optimizer.param_groups) != 1:
        return False
    if len(optimizer.param_groups[0]["params"]) != len(params):
        return False
    state = optimizer.state
    return all(state.get(p) for p in params)


class _AdamLists(NamedTuple):
    """A member's Adam tensors in parameter order, as one fused step takes them. Valid
    while the optimizer keeps its ``state`` dict: its entries, once created, are updated
    in place (a load or a rebuilt optimizer brings a new dict)."""

    state: dict[torch.Tensor, dict[str, torch.Tensor]]
    params: list[torch.Tensor]
    avgs: list[torch.Tensor]
    sqs: list[torch.Tensor]
    steps: list[torch.Tensor]
    counters: list[torch.Tensor]  # the distinct step counters (parameters share them)
