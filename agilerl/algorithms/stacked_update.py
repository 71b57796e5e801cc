"""One gradient step for several members whose networks have the same architecture.

The members' parameters are stacked along a new leading dimension and every member's loss
is computed in one pass of grouped matrix products (``torch.baddbmm``/``torch.bmm`` over the
stacked layers, :mod:`agilerl.networks.stacked_mlp`): a population of small MLPs costs one
batched forward and backward instead of one per member.

The gradient is computed in closed form when the members' own update is
(:class:`~agilerl.networks.stacked_mlp_gradient.StackedMLPChain`, the stacked form of
:class:`~agilerl.networks.mlp_gradient.MLPChain`): each member's own loss-and-gradient
function (the one its ``learn`` uses) is called on its rows of the stacked Q-values, and
the chain rule runs on the stacks without the autograd engine. Networks outside the closed
form (an activation it has no backward for) take the stacked forward through autograd.

Each member then steps its *own* optimizer on its slice of the stacked gradient (clipped
to its own norm where the algorithm clips; :mod:`.member_stacks`) and moves its own target
network. The result equals one
``agent.learn(batch)`` per member up to float rounding (batched products sum in another
order).

Members may sample batches of different sizes (``batch_size`` is mutable): the batches are
padded to the largest and each member's loss is the mean over its own rows (padding rows
get a zero gradient).

Supported: :class:`~agilerl.algorithms.dqn.DQN` (plain and double) and
:class:`~agilerl.algorithms.cqn.CQN` (its CQL term and per-member gradient clipping), with
an MLP encoder and head. :func:`group_key` is None for anything else; the caller then uses
``agent.learn``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from agilerl.algorithms.core.member_stacks import MemberAdams, MemberStacks, clip_member_grads
from agilerl.algorithms.core.target import Experiences
from agilerl.algorithms.cqn import CQN
from agilerl.algorithms.dqn import DQN, bellman_target
from agilerl.modules.mlp import EvolvableMLP, MLPEncoder
from agilerl.networks.mlp_gradient import MLPChain
from agilerl.networks.q_network import QNetwork
from agilerl.networks.stacked_mlp import (
    GradientKeeper,
    gradient_keeper,
    layer_parameters,
    stacked_forward,
    stacked_layers,
)
from agilerl.networks.stacked_mlp_gradient import StackedMLPChain, StackedTape

Batch = Experiences


def group_key(agent: object) -> Hashable | None:
    """Members with equal keys can take one stacked step; None when this agent cannot.

    The key holds the algorithm, the fixed hyperparameters that change the loss's form,
    the device and the network's architecture (its module tree and parameter shapes).
    """
    if type(agent) not in STACKABLE:
        return None
    assert isinstance(agent, DQN)  # (STACKABLE: DQN and CQN, a DQN)
    if agent.obs_encoder.composite:
        return None
    net = agent.actor
    if not _stackable(net):
        return None
    shapes = tuple((name, tuple(p.shape), p.dtype) for name, p in net.named_parameters())
    return (type(agent), bool(agent.double), str(agent.device), repr(net), shapes)


def _stackable(net: nn.Module) -> bool:
    """A Q-network of an MLP encoder and an MLP head whose parameters are all in their
    linear layers and layer norms (a parametrised activation would not be stacked)."""
    if type(net) is not QNetwork or set(net.encoders) != {"encoder"} or set(net.heads) != {"q"}:
        return False
    if type(net.encoder("encoder")) is not MLPEncoder or type(net.head("q")) is not EvolvableMLP:
        return False
    if any(True for _ in net.buffers()):
        return False
    return len(_member_params(net)) == len(list(net.parameters()))


def learn_together(agents: Sequence[DQN], batches: Sequence[Batch]) -> list[dict[str, float]]:
    """One learning update of every agent on its batch; the agents share a
    :func:`group_key`. Returns each agent's metrics (what its ``learn`` would return)."""
    return StackedGroup(agents).learn(range(len(agents)), batches)


def _mlps(net: QNetwork) -> list[EvolvableMLP]:
    """The Q-network's encoder then head."""
    encoder = net.encoder("encoder")
    assert isinstance(encoder, EvolvableMLP)  # (an MLP encoder: see _stackable)
    return [encoder, net.head("q")]


def _member_params(net: QNetwork) -> list[torch.Tensor]:
    """The network's parameters in layer order: weight, bias[, norm weight, norm bias]."""
    return layer_parameters(_mlps(net))


class StackedGroup:
    """Members with one :func:`group_key` (fixed while it lives: build a new group after a
    mutation). :meth:`learn` updates any subset of them at once."""

    key = staticmethod(group_key)

    def __init__(self, agents: Sequence[DQN]) -> None:
        self.agents = list(agents)
        self.layers = stacked_layers(_mlps(self.agents[0].actor))
        self.online = [_member_params(a.actor) for a in self.agents]
        self.target = [_member_params(a.actor_target) for a in self.agents]
        self.chain = _closed_form_chain(self.agents[0])
        self._stacks = MemberStacks([self.online, self.target], [self.chain is None, False])
        self._adams = MemberAdams()

    def learn(self, members: Sequence[int], batches: Sequence[Batch]) -> list[dict[str, float]]:
        """One update of ``self.agents[m]`` on ``batches[i]`` for the i-th ``m`` in
        ``members``; each member's metrics, in that order."""
        members = list(members)
        agents = [self.agents[m] for m in members]
        if len(members) == 1:
            return [dict(agents[0].learn(batches[0]))]
        online, target = self._stacks.gather(members)
        if self.chain is not None:
            metrics, grads = self._closed_form(agents, batches, online, target)
        else:
            metrics, grads = self._autograd(agents, batches, online, target)
        clip = type(agents[0]).grad_norm_clip
        if clip is not None:
            clip_member_grads(grads, clip)
        self._step(members, grads)
        return metrics

    def _autograd(self, agents: list[DQN], batches: Sequence[Batch],
                  online: list[torch.Tensor], target: list[torch.Tensor]
                  ) -> tuple[list[dict[str, float]], list[torch.Tensor | None]]:
        """Every member's metrics and the stacked gradients, through autograd: each
        member's own :meth:`DQN.loss_terms` on its rows of the stacked Q-values."""
        batch = _stacked_batch(agents, batches)
        y = _td_target(agents[0].double, batch, partial(self.forward, online),
                       partial(self.forward, target))
        q_all = self.forward(online, batch.obs, _keeper(agents, batch.sizes))
        q = q_all.gather(2, batch.action).squeeze(2)
        terms = [agent.loss_terms(q_all[g, :rows], q[g, :rows], y[g, :rows])
                 for g, (agent, rows) in enumerate(zip(agents, batch.sizes, strict=True))]
        torch.stack([member["loss"] for member in terms]).sum().backward()
        values = torch.stack([torch.stack(list(member.values())) for member in terms]).tolist()
        names = type(agents[0]).loss_metric_names
        return ([dict(zip(names, row, strict=True)) for row in values],
                [leaf.grad for leaf in online])

    @torch.no_grad()
    def _closed_form(self, agents: list[DQN], batches: Sequence[Batch],
                     online: list[torch.Tensor], target: list[torch.Tensor]
                     ) -> tuple[list[dict[str, float]], list[torch.Tensor | None]]:
        """Every member's metrics and the stacked gradients in closed form: the stacked
        chain's forward and backward around each member's own loss-and-gradient function
        (called on its rows of the stacked Q-values)."""
        chain = self.chain
        assert chain is not None
        batch = _stacked_batch(agents, batches)
        y = _td_target(agents[0].double, batch, partial(chain.forward, online),
                       partial(chain.forward, target))
        tape: StackedTape = []
        q_all = chain.forward(online, batch.obs, tape)
        terms: list[torch.Tensor] = []
        member_grads: list[torch.Tensor] = []
        for g, (agent, rows) in enumerate(zip(agents, batch.sizes, strict=True)):
            loss, grad = agent.loss_and_grad(q_all[g, :rows], batch.action[g, :rows],
                                             y[g, :rows])
            terms.append(torch.stack(loss))
            member_grads.append(grad)
        if len(set(batch.sizes)) == 1:
            grad_q = torch.stack(member_grads)
        else:  # padding rows take no part in the loss: a zero gradient
            grad_q = torch.zeros_like(q_all)
            for g, grad in enumerate(member_grads):
                grad_q[g, : len(grad)] = grad
        grads = chain.backward(online, tape, grad_q, _keeper(agents, batch.sizes))
        names = type(agents[0]).loss_metric_names
        return ([dict(zip(names, row, strict=True)) for row in torch.stack(terms).tolist()],
                list(grads))

    @torch.no_grad()
    def _step(self, members: list[int], stacked: Sequence[torch.Tensor | None]) -> None:
        """Every member's Adam step on its slice of the ``stacked`` gradients, then its soft
        target update: the maths of its ``learn``, with one kernel call per distinct tau."""
        slices = [grad.unbind(0) if grad is not None else None for grad in stacked]
        self._adams.step([(m, self.agents[m].optimizers["optimizer"], self.online[m],
                           [s[g] if s is not None else None for s in slices])
                          for g, m in enumerate(members)])
        lerps: dict[float, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for m in members:
            pair = lerps.setdefault(float(self.agents[m].tau), ([], []))
            pair[0].extend(self.target[m])
            pair[1].extend(self.online[m])
        for tau, (targets, sources) in lerps.items():
            torch._foreach_lerp_(targets, sources, tau)

    def forward(self, params: Sequence[torch.Tensor], x: torch.Tensor,
                keep: GradientKeeper | None = None) -> torch.Tensor:
        """The stacked networks ``params`` (member-stacked, in :func:`_member_params`
        order) on ``x`` of shape (members, rows, in)."""
        return stacked_forward(self.layers, params, x, keep)


def _keeper(agents: Sequence[DQN], rows: Sequence[int]) -> GradientKeeper:
    """Each member's gradients for ReGraMa, as its own update keeps them."""
    return gradient_keeper([_mlps(agent.actor) for agent in agents], rows)


def _stacked_field(batches: Sequence[Batch], name: str, rows: int) -> np.ndarray:
    """``batches[g][name]`` stacked to ``(members, rows, ...)``, short batches zero-padded."""
    values = [np.asarray(b[name]) for b in batches]
    if all(len(value) == rows for value in values):
        return np.stack(values)
    out = np.zeros((len(values), rows, *values[0].shape[1:]), dtype=values[0].dtype)
    for g, value in enumerate(values):
        out[g, : len(value)] = value
    return out


def _obs(agent: DQN, stacked: np.ndarray) -> torch.Tensor:
    members, rows = stacked.shape[:2]
    tensor = agent.to_tensor(stacked.reshape(members * rows, *stacked.shape[2:]))
    assert isinstance(tensor, torch.Tensor)  # (stackable: not composite observations)
    return tensor.reshape(members, rows, *tensor.shape[1:])  # type: ignore[no-any-return]


Forward = Callable[[torch.Tensor], torch.Tensor]


class _StackedBatch(NamedTuple):
    """Every member's batch as (members, rows, ...) tensors, short batches zero-padded."""

    obs: torch.Tensor
    next_obs: torch.Tensor
    action: torch.Tensor  # (members, rows, 1), long
    reward: torch.Tensor  # (members, rows)
    done: torch.Tensor  # (members, rows)
    gamma: torch.Tensor  # (members, 1)
    sizes: list[int]  # each member's own rows


def _stacked_batch(agents: Sequence[DQN], batches: Sequence[Batch]) -> _StackedBatch:
    base = agents[0]
    sizes = [len(np.asarray(b["reward"]).reshape(-1)) for b in batches]
    rows = max(sizes)
    device = base.device
    action = torch.as_tensor(_stacked_field(batches, "action", rows), device=device)
    return _StackedBatch(
        _obs(base, _stacked_field(batches, "obs", rows)),
        _obs(base, _stacked_field(batches, "next_obs", rows)),
        action.to(torch.long).reshape(len(agents), rows, 1),
        torch.as_tensor(_stacked_field(batches, "reward", rows), dtype=torch.float32,
                        device=device).reshape(len(agents), rows),
        torch.as_tensor(_stacked_field(batches, "done", rows), dtype=torch.float32,
                        device=device).reshape(len(agents), rows),
        torch.tensor([[float(a.gamma)] for a in agents], dtype=torch.float32, device=device),
        sizes)


@torch.no_grad()
def _td_target(double: bool, batch: _StackedBatch, online: Forward,
               target_net: Forward) -> torch.Tensor:
    """Every member's TD target (members, rows), as :meth:`DQN.td_target` computes it for
    one member."""
    return bellman_target(batch.reward, batch.done, batch.gamma, target_net(batch.next_obs),
                          online(batch.next_obs) if double else None)


#: The algorithms whose members can learn together: exact classes, since a subclass may
#: change the update.
STACKABLE: tuple[type, ...] = (DQN, CQN)


def _closed_form_chain(agent: DQN) -> StackedMLPChain | None:
    """The stacked closed-form chain of ``agent``'s group, or None when its Q-network's
    gradient has no closed form here (the group then learns through autograd)."""
    net = agent.actor  # a Q-network of an MLP encoder and head (see _stackable)
    chain = MLPChain(_mlps(net))
    order = [id(p) for p in StackedMLPChain.parameters(chain)]
    if order != [id(p) for p in _member_params(net)]:
        return None
    return StackedMLPChain.of(chain)
