"""One gradient step for several members whose networks have the same architecture.

The members' parameters are stacked along a new leading dimension and every member's loss
is computed in one pass of grouped matrix products (``torch.baddbmm``/``torch.bmm`` over the
stacked layers): a population of small MLPs costs one batched forward and backward instead
of one per member. Grouped matmuls rather than ``torch.func.vmap(functional_call(...))``:
the MLPs call ``F.linear`` on cached parameter references (their fast acting path), which
``functional_call`` cannot swap, and one ``baddbmm`` per layer has less dispatch overhead.

The gradient is computed in closed form when the members' own update is
(:class:`~agilerl.networks.stacked_mlp_gradient.StackedMLPChain`, the stacked form of
:class:`~agilerl.networks.mlp_gradient.MLPChain`): each member's own loss-and-gradient
function (the one its ``learn`` uses) is called on its rows of the stacked Q-values, and
the chain rule runs on the stacks without the autograd engine. Networks outside the closed
form (an activation it has no backward for) take the stacked forward through autograd.

Each member then steps its *own* optimizer on its slice of the stacked gradient (clipped
to its own norm where the algorithm clips) and moves its own target network, so learning
rates, Adam moments and step counts stay per member (they differ after hyperparameter
mutation) and checkpoints, cloning and mutation see ordinary agents. The result equals one
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

from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from agilerl.algorithms.cqn import CQN
from agilerl.algorithms.dqn import DQN, bellman_target
from agilerl.modules.mlp import EvolvableMLP, MLPEncoder
from agilerl.networks.mlp_gradient import MLPChain
from agilerl.networks.optim import Adam
from agilerl.networks.q_network import QNetwork
from agilerl.networks.stacked_mlp_gradient import StackedMLPChain, StackedTape

Batch = Mapping[str, Any]


def group_key(agent: Any) -> Hashable | None:
    """Members with equal keys can take one stacked step; None when this agent cannot.

    The key holds the algorithm, the fixed hyperparameters that change the loss's form,
    the device and the network's architecture (its module tree and parameter shapes).
    """
    if type(agent) not in STACKABLE or agent.obs_encoder.composite:
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
        self.layers = [_Layer((tuple(norm.normalized_shape), float(norm.eps))
                              if norm is not None else None, act)
                       for _, norm, act in _mlp_layers(self.agents[0].actor)]
        self.online = [_member_params(a.actor) for a in self.agents]
        self.target = [_member_params(a.actor_target) for a in self.agents]
        self.chain = _closed_form_chain(self.agents[0])
        # Stacks of the whole group, refreshed in place by two foreach copies when every
        # member learns (the usual case) instead of one stack per parameter tensor.
        count = len(self.online[0])
        self._leaves = [torch.stack([p[i].detach() for p in self.online])
                        .requires_grad_(self.chain is None) for i in range(count)]
        self._targets = [torch.stack([p[i].detach() for p in self.target]) for i in range(count)]
        rows = range(len(self.agents))
        self._sources = [p for params in (*self.online, *self.target) for p in params]
        self._adam: dict[int, _AdamLists] = {}
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
        if self.chain is not None:
            metrics, grads = self._closed_form(agents, batches, online, target)
        else:
            metrics, grads = self._autograd(agents, batches, online, target)
        clip = type(agents[0]).grad_norm_clip
        if clip is not None:
            _clip_member_grads(grads, clip)
        self._step(members, grads)
        return metrics

    def _autograd(self, agents: list[Any], batches: Sequence[Batch],
                  online: list[torch.Tensor], target: list[torch.Tensor]
                  ) -> tuple[list[dict[str, float]], list[torch.Tensor | None]]:
        """Every member's metrics and the stacked gradients, through autograd: each
        member's own :meth:`DQN.loss_terms` on its rows of the stacked Q-values."""
        batch = _stacked_batch(agents, batches)
        y = _td_target(agents[0].double, batch, partial(self.forward, online),
                       partial(self.forward, target))
        q_all = self.forward(online, batch.obs)
        q = q_all.gather(2, batch.action).squeeze(2)
        terms = [agent.loss_terms(q_all[g, :rows], q[g, :rows], y[g, :rows])
                 for g, (agent, rows) in enumerate(zip(agents, batch.sizes, strict=True))]
        torch.stack([member["loss"] for member in terms]).sum().backward()
        values = torch.stack([torch.stack(list(member.values())) for member in terms]).tolist()
        names = type(agents[0]).loss_metric_names
        return ([dict(zip(names, row, strict=True)) for row in values],
                [leaf.grad for leaf in online])

    @torch.no_grad()
    def _closed_form(self, agents: list[Any], batches: Sequence[Batch],
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
            terms.append(torch.stack(loss) if isinstance(loss, tuple) else loss.reshape(1))
            member_grads.append(grad)
        if len(set(batch.sizes)) == 1:
            grad_q = torch.stack(member_grads)
        else:  # padding rows take no part in the loss: a zero gradient
            grad_q = torch.zeros_like(q_all)
            for g, grad in enumerate(member_grads):
                grad_q[g, : len(grad)] = grad
        grads = chain.backward(online, tape, grad_q)
        names = type(agents[0]).loss_metric_names
        return ([dict(zip(names, row, strict=True)) for row in torch.stack(terms).tolist()],
                list(grads))

    @torch.no_grad()
    def _step(self, members: list[int], stacked: Sequence[torch.Tensor | None]) -> None:
        """Every member's Adam step on its slice of the ``stacked`` gradients, then its soft
        target update: the maths of its ``learn``, bit for bit (the same fused kernels),
        with one kernel call per distinct (lr, betas, eps) and per distinct tau."""
        slices = [grad.unbind(0) if grad is not None else None for grad in stacked]
        adam: dict[tuple[Any, ...], list[tuple[_AdamLists, list[torch.Tensor]]]] = {}
        for g, m in enumerate(members):
            agent, params = self.agents[m], self.online[m]
            grads = [s[g] if s is not None else None for s in slices]
            optimizer = agent.optimizers["optimizer"]
            ready = all(grad is not None for grad in grads)
            lists = self._adam_lists(m, optimizer) if ready else None
            if lists is not None:
                group = optimizer.param_groups[0]
                adam.setdefault((group["lr"], group["betas"], group["eps"]), []).append(
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
        for (lr, (beta1, beta2), eps), entries in adam.items():
            params_: list[torch.Tensor] = []
            grads_: list[torch.Tensor] = []
            avgs: list[torch.Tensor] = []
            sqs: list[torch.Tensor] = []
            steps: list[torch.Tensor] = []
            for lists, member_grads in entries:
                for counter in lists.counters:
                    counter.add_(1.0)
                params_ += lists.params
                grads_ += member_grads
                avgs += lists.avgs
                sqs += lists.sqs
                steps += lists.steps
            torch._fused_adam_(params_, grads_, avgs, sqs, [], steps, lr=lr, beta1=beta1,
                               beta2=beta2, weight_decay=0.0, eps=eps, amsgrad=False,
                               maximize=False)
        lerps: dict[float, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for m in members:
            pair = lerps.setdefault(float(self.agents[m].tau), ([], []))
            pair[0].extend(self.target[m])
            pair[1].extend(self.online[m])
        for tau, (targets, sources) in lerps.items():
            torch._foreach_lerp_(targets, sources, tau)

    def _adam_lists(self, m: int, optimizer: Any) -> _AdamLists | None:
        """Member ``m``'s Adam tensors for one fused step, or None when its ``step`` must
        run instead (another optimizer, or state not yet created: its first step)."""
        cached = self._adam.get(m)
        if cached is not None and cached.state is optimizer.state:
            return cached
        params = self.online[m]
        if not _adam_ready(optimizer, params):
            return None
        states = [optimizer.state[p] for p in params]
        steps = [state["step"] for state in states]
        lists = _AdamLists(optimizer.state, params, [state["exp_avg"] for state in states],
                           [state["exp_avg_sq"] for state in states], steps,
                           list({id(step): step for step in steps}.values()))
        self._adam[m] = lists
        return lists

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
        return [p.requires_grad_(self.chain is None) for p in online], target

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
def _clip_member_grads(stacked: Sequence[torch.Tensor | None], max_norm: float) -> None:
    """Scale each member's slice of the ``stacked`` gradients so that its joint L2 norm is
    at most ``max_norm`` (:func:`~agilerl.algorithms.core.target.clip_grad_norm` per
    member)."""
    grads = [grad for grad in stacked if grad is not None]
    if not grads:
        return
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])
    total = torch.linalg.vector_norm(norms, dim=0)
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for grad in grads:
        grad.mul_(scale.reshape(-1, *([1] * (grad.dim() - 1))))


def _adam_ready(optimizer: Any, params: Sequence[torch.Tensor]) -> bool:
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


def _stacked_field(batches: Sequence[Batch], name: str, rows: int) -> np.ndarray:
    """``batches[g][name]`` stacked to ``(members, rows, ...)``, short batches zero-padded."""
    values = [np.asarray(b[name]) for b in batches]
    if all(len(value) == rows for value in values):
        return np.stack(values)
    out = np.zeros((len(values), rows, *values[0].shape[1:]), dtype=values[0].dtype)
    for g, value in enumerate(values):
        out[g, : len(value)] = value
    return out


def _obs(agent: Any, stacked: np.ndarray) -> torch.Tensor:
    members, rows = stacked.shape[:2]
    tensor = agent.to_tensor(stacked.reshape(members * rows, *stacked.shape[2:]))
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


def _closed_form_chain(agent: Any) -> StackedMLPChain | None:
    """The stacked closed-form chain of ``agent``'s group, or None when its Q-network's
    gradient has no closed form here (the group then learns through autograd)."""
    net = agent.actor  # a Q-network of an MLP encoder and head (see _stackable)
    chain = MLPChain([net.encoder("encoder"), net.head("q")])
    order = [id(p) for p in StackedMLPChain.parameters(chain)]
    if order != [id(p) for p in _member_params(net)]:
        return None
    return StackedMLPChain.of(chain)
