"""One gradient step for several members whose networks have the same architecture.

The members' parameters are stacked along a new leading dimension and every member's loss
is computed in one pass of grouped matrix products (``torch.baddbmm`` over the stacked
layers): a population of small MLPs costs one batched forward and backward instead of one
per member. Grouped matmuls rather than ``torch.func.vmap(functional_call(...))``: the
MLPs call ``F.linear`` on cached parameter references (their fast acting path), which
``functional_call`` cannot swap, and one ``baddbmm`` per layer has less dispatch overhead.
Each member then steps its *own* optimizer on its slice of the stacked gradient and moves
its own target network, so learning rates, Adam moments and step counts stay per member
(they differ after hyperparameter mutation) and checkpoints, cloning and mutation see
ordinary agents. The result equals one ``agent.learn(batch)`` per member up to float
rounding (batched products sum in another order).

Members may sample batches of different sizes (``batch_size`` is mutable): the batches are
padded to the largest and each member's loss is the mean over its own rows.

Supported: :class:`~agilerl.algorithms.dqn.DQN` (plain and double) and
:class:`~agilerl.algorithms.cqn.CQN` (its CQL term and per-member gradient clipping), with
an MLP encoder and head. :func:`group_key` is None for anything else; the caller then uses ``agent.learn``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from agilerl.algorithms.cqn import CQN
from agilerl.algorithms.cqn import MAX_GRAD_NORM as CQN_MAX_GRAD_NORM
from agilerl.algorithms.dqn import DQN
from agilerl.modules.mlp import EvolvableMLP, MLPEncoder
from agilerl.networks.optim import Adam
from agilerl.networks.q_network import QNetwork

Batch = Mapping[str, Any]


def group_key(agent: Any) -> Hashable | None:
    """Members with equal keys can take one stacked step; None when this agent cannot.

    The key holds the algorithm, the fixed hyperparameters that change the loss's form,
    the device and the network's architecture (its module tree and parameter shapes).
    """
    if type(agent) not in STACKED_LOSSES or agent.obs_encoder.composite:
        return None
    net = agent.actor
    if not _stackable(net):
        return None
    shapes = tuple((name, tuple(p.shape), p.dtype) for name, p in net.named_parameters())
    return (type(agent), bool(agent.double), str(agent.device), repr(net), shapes)


def _stackable(net: Any) -> bool:
    """A Q-network of an MLP encoder and an MLP head whose parameters are all in their
    linear layers and layer norms (a parametrised activation would not be stacked)."""
    if type(net) is not QNetwork or set(net.encoders) != {"encoder"} or set(net.heads) != {"q"}:
        return False
    if type(net.encoder("encoder")) is not MLPEncoder or type(net.head("q")) is not EvolvableMLP:
        return False
    if any(True for _ in net.buffers()):
        return False
    return len(_member_params(net)) == len(list(net.parameters()))


def learn_together(agents: Sequence[Any], batches: Sequence[Batch]) -> list[dict[str, float]]:
    """One learning update of every agent on its batch; the agents share a
    :func:`group_key`. Returns each agent's metrics (what its ``learn`` would return)."""
    return StackedGroup(agents).learn(range(len(agents)), batches)


class _Layer(NamedTuple):
    """What a linear layer of the group's architecture does besides its matrix product."""

    norm: tuple[tuple[int, ...], float] | None  # layer norm after it: (shape, eps)
    act: Any


def _mlp_layers(net: Any) -> list[tuple[nn.Linear, nn.LayerNorm | None, Any]]:
    """(linear, layer norm or None, activation) of the Q-network's encoder then head."""
    layers: list[tuple[nn.Linear, nn.LayerNorm | None, Any]] = []
    for mlp in (net.encoder("encoder"), net.head("q")):
        hidden = len(mlp.linears) - 1
        for i in range(hidden + 1):
            norm = mlp.norms[i] if i < hidden else None
            layers.append((mlp.linear(i), norm if isinstance(norm, nn.LayerNorm) else None,
                           mlp.acts[i] if i < hidden else mlp.out_act))
    return layers


def _member_params(net: Any) -> list[torch.Tensor]:
    """The network's parameters in layer order: weight, bias[, norm weight, norm bias]."""
    params: list[torch.Tensor] = []
    for linear, norm, _ in _mlp_layers(net):
        params += [linear.weight, linear.bias]
        if norm is not None:
            params += [norm.weight, norm.bias]
    return params


class StackedGroup:
    """Members with one :func:`group_key` (fixed while it lives: build a new group after a
    mutation). :meth:`learn` updates any subset of them at once."""

    def __init__(self, agents: Sequence[Any]) -> None:
        self.agents = list(agents)
        self.loss = STACKED_LOSSES[type(self.agents[0])]
        self.layers = [_Layer((tuple(norm.normalized_shape), float(norm.eps))
                              if norm is not None else None, act)
                       for _, norm, act in _mlp_layers(self.agents[0].actor)]
        self.online = [_member_params(a.actor) for a in self.agents]
        self.target = [_member_params(a.actor_target) for a in self.agents]
        # Stacks of the whole group, refreshed in place by two foreach copies when every
        # member learns (the usual case) instead of one stack per parameter tensor.
        count = len(self.online[0])
        self._leaves = [torch.stack([p[i].detach() for p in self.online]).requires_grad_()
                        for i in range(count)]
        self._targets = [torch.stack([p[i].detach() for p in self.target]) for i in range(count)]
        rows = range(len(self.agents))
        self._sources = [p for params in (*self.online, *self.target) for p in params]
        self._slots = ([leaf.detach()[g] for g in rows for leaf in self._leaves]
                       + [stack[g] for g in rows for stack in self._targets])

    def learn(self, members: Sequence[int], batches: Sequence[Batch]) -> list[dict[str, float]]:
        """One update of ``self.agents[m]`` on ``batches[i]`` for the i-th ``m`` in
        ``members``; each member's metrics, in that order."""
        members = list(members)
        agents = [self.agents[m] for m in members]
        if len(members) == 1:
            return [dict(agents[0].learn(batches[0]))]
        online, target = self._stacks(members)
        losses = self.loss.losses(agents, batches, partial(self.forward, online),
                                  partial(self.forward, target))
        losses["loss"].sum().backward()
        if self.loss.max_grad_norm is not None:
            _clip_member_grads(online, self.loss.max_grad_norm)
        self._step(members, online)
        values = {name: value.detach().tolist() for name, value in losses.items()}
        return [{name: column[g] for name, column in values.items()}
                for g in range(len(members))]

    @torch.no_grad()
    def _step(self, members: list[int], online: list[torch.Tensor]) -> None:
        """Every member's Adam step on its slice of the stacked gradient, then its soft
        target update: the maths of its ``learn``, bit for bit (the same fused kernels),
        with one kernel call per distinct (lr, betas, eps) and per distinct tau."""
        slices = [leaf.grad.unbind(0) if leaf.grad is not None else None for leaf in online]
        adam: dict[tuple[Any, ...], list[tuple[Any, list[torch.Tensor], list[torch.Tensor]]]] = {}
        for g, m in enumerate(members):
            agent, params = self.agents[m], self.online[m]
            grads = [s[g] if s is not None else None for s in slices]
            optimizer = agent.optimizers["optimizer"]
            if _adam_ready(optimizer, params, grads):
                group = optimizer.param_groups[0]
                adam.setdefault((group["lr"], group["betas"], group["eps"]), []).append(
                    (optimizer, params, grads))  # type: ignore[arg-type]
                continue
            for param, grad in zip(params, grads, strict=True):  # its own step (first one)
                param.grad = grad
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        for (lr, (beta1, beta2), eps), entries in adam.items():
            lists: tuple[list[torch.Tensor], ...] = ([], [], [], [], [])
            counters: dict[int, torch.Tensor] = {}
            for member_adam, member_params, member_grads in entries:
                for param, grad in zip(member_params, member_grads, strict=True):
                    state = member_adam.state[param]
                    for out, value in zip(lists, (param, grad, state["exp_avg"],
                                                  state["exp_avg_sq"], state["step"]),
                                          strict=True):
                        out.append(value)
                    counters[id(state["step"])] = state["step"]
            for counter in counters.values():
                counter.add_(1.0)
            params_, grads_, avgs, sqs, steps = lists
            torch._fused_adam_(params_, grads_, avgs, sqs, [], steps, lr=lr, beta1=beta1,
                               beta2=beta2, weight_decay=0.0, eps=eps, amsgrad=False,
                               maximize=False)
        lerps: dict[float, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for m in members:
            agent = self.agents[m]
            targets, sources = agent._param_pairs()
            pair = lerps.setdefault(float(agent.tau), ([], []))
            pair[0].extend(targets)
            pair[1].extend(sources)
        for tau, (targets, sources) in lerps.items():
            torch._foreach_lerp_(targets, sources, tau)

    def _stacks(self, members: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The stacked online parameters (leaves with gradients) and target parameters of
        ``members``, holding the members' current values."""
        with torch.no_grad():
            if members == list(range(len(self.agents))):
                torch._foreach_copy_(self._slots, self._sources)
                for leaf in self._leaves:
                    leaf.grad = None
                return self._leaves, self._targets
            count = range(len(self.online[0]))
            online = [torch.stack([self.online[m][i] for m in members]) for i in count]
            target = [torch.stack([self.target[m][i] for m in members]) for i in count]
        return [p.requires_grad_() for p in online], target

    def forward(self, params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """The stacked networks ``params`` (member-stacked, in :func:`_member_params`
        order) on ``x`` of shape (members, rows, in)."""
        i = 0
        for layer in self.layers:
            weight, bias = params[i], params[i + 1]
            x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
            i += 2
            if layer.norm is not None:
                shape, eps = layer.norm
                x = (F.layer_norm(x, shape, None, None, eps) * params[i].unsqueeze(1)
                     + params[i + 1].unsqueeze(1))
                i += 2
            x = layer.act(x)
        return x


@torch.no_grad()
def _clip_member_grads(leaves: Sequence[torch.Tensor], max_norm: float) -> None:
    """Scale each member's slice of the stacked gradients so that its joint L2 norm is at
    most ``max_norm`` (:func:`~agilerl.algorithms.core.target.clip_grad_norm` per member)."""
    grads = [leaf.grad for leaf in leaves if leaf.grad is not None]
    if not grads:
        return
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])
    total = torch.linalg.vector_norm(norms, dim=0)
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for grad in grads:
        grad.mul_(scale.reshape(-1, *([1] * (grad.dim() - 1))))


def _adam_ready(optimizer: Any, params: Sequence[torch.Tensor],
                grads: Sequence[torch.Tensor | None]) -> bool:
    """Whether one fused Adam call may step ``params`` for ``optimizer`` (an
    :class:`~agilerl.networks.optim.Adam` over exactly them, with state for each, and a
    gradient for each): what its ``step`` would do then is that one kernel."""
    if not isinstance(optimizer, Adam) or len(optimizer.param_groups) != 1:
        return False
    if len(optimizer.param_groups[0]["params"]) != len(params):
        return False
    state = optimizer.state
    return all(g is not None for g in grads) and all(state.get(p) for p in params)


def _stacked_field(batches: Sequence[Batch], name: str, rows: int) -> np.ndarray:
    """``batches[g][name]`` stacked to ``(members, rows, ...)``, short batches zero-padded."""
    values = [np.asarray(b[name]) for b in batches]
    out = np.zeros((len(values), rows, *values[0].shape[1:]), dtype=values[0].dtype)
    for g, value in enumerate(values):
        out[g, : len(value)] = value
    return out


def _obs(agent: Any, stacked: np.ndarray) -> torch.Tensor:
    members, rows = stacked.shape[:2]
    tensor = agent.to_tensor(stacked.reshape(members * rows, *stacked.shape[2:]))
    return tensor.reshape(members, rows, *tensor.shape[1:])  # type: ignore[no-any-return]


Forward = Callable[[torch.Tensor], torch.Tensor]


def _td_terms(agents: Sequence[DQN], batches: Sequence[Batch], online: Forward,
              target_net: Forward) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """``(Q(s, .), Q(s, a), target, rows per member)`` of every member's batch, stacked
    (members, rows, ...), as :meth:`DQN.td_terms` computes them for one member."""
    base = agents[0]
    sizes = [len(np.asarray(b["reward"]).reshape(-1)) for b in batches]
    rows = max(sizes)
    device = base.device
    obs = _obs(base, _stacked_field(batches, "obs", rows))
    next_obs = _obs(base, _stacked_field(batches, "next_obs", rows))
    action = torch.as_tensor(_stacked_field(batches, "action", rows), device=device)
    action = action.to(torch.long).reshape(len(agents), rows, 1)
    reward = torch.as_tensor(_stacked_field(batches, "reward", rows), dtype=torch.float32,
                             device=device).reshape(len(agents), rows)
    done = torch.as_tensor(_stacked_field(batches, "done", rows), dtype=torch.float32,
                           device=device).reshape(len(agents), rows)
    gamma = torch.tensor([[float(a.gamma)] for a in agents], dtype=torch.float32, device=device)

    if base.double:
        q_both = online(torch.cat([obs, next_obs], dim=1))
        q_online, q_next_online = q_both[:, :rows], q_both[:, rows:].detach()
    else:
        q_online = online(obs)
    with torch.no_grad():
        q_next_target = target_net(next_obs)
        if base.double:
            best = q_next_online.argmax(dim=-1, keepdim=True)
            q_next = q_next_target.gather(2, best).squeeze(2)
        else:
            q_next = q_next_target.amax(dim=-1)
        target = reward + gamma * (1.0 - done) * q_next
    return q_online, q_online.gather(2, action).squeeze(2), target, sizes


def _row_mean(values: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Mean over each member's own rows of (members, rows) ``values`` (padding excluded)."""
    if len(set(sizes)) == 1:
        return values.mean(dim=1)
    counts = torch.tensor(sizes, device=values.device)
    mask = torch.arange(values.shape[1], device=values.device)[None, :] < counts[:, None]
    return (values * mask).sum(dim=1) / counts


def _dqn_losses(agents: Sequence[DQN], batches: Sequence[Batch], online: Forward,
                target_net: Forward) -> dict[str, torch.Tensor]:
    """Per-member DQN loss: mean squared TD error over the member's rows."""
    _, q, target, sizes = _td_terms(agents, batches, online, target_net)
    return {"loss": _row_mean((q - target).square(), sizes)}


def _cqn_losses(agents: Sequence[CQN], batches: Sequence[Batch], online: Forward,
                target_net: Forward) -> dict[str, torch.Tensor]:
    """Per-member CQN loss, as :meth:`CQN.learn`: ``0.5 * td + cql_alpha * cql``."""
    q_all, q, target, sizes = _td_terms(agents, batches, online, target_net)
    td_loss = _row_mean((q - target).square(), sizes)
    cql = _row_mean(torch.logsumexp(q_all, dim=-1) - q, sizes)
    alpha = torch.tensor([float(a.cql_alpha) for a in agents], dtype=torch.float32,
                         device=q.device)
    return {"loss": 0.5 * td_loss + alpha * cql, "td_loss": td_loss, "cql_loss": cql}


class StackedLoss(NamedTuple):
    """An algorithm's per-member losses (``"loss"`` is minimised; every entry is reported
    as a metric) and the gradient-norm clip of its update (None: no clipping)."""

    losses: Callable[[Sequence[Any], Sequence[Batch], Forward, Forward],
                     dict[str, torch.Tensor]]
    max_grad_norm: float | None = None


#: Algorithm class -> its stacked update (exact classes: a subclass changes the loss).
STACKED_LOSSES: dict[type, StackedLoss] = {
    DQN: StackedLoss(_dqn_losses),
    CQN: StackedLoss(_cqn_losses, CQN_MAX_GRAD_NORM),
}
