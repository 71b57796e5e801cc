"""One PPO update (all its epochs and minibatches) for several members whose actor-critics
have the same architecture.

Each member's update is the one its :meth:`~agilerl.algorithms.ppo.PPO.learn` makes on its
own rollout: its own minibatches (:meth:`PPO.minibatches`, permutations drawn from its own
generator), its own ``clip_coef``, ``ent_coef``, ``vf_coef``, ``max_grad_norm`` and
``target_kl`` early stop, and its own optimizer. The members' k-th minibatch steps are taken
together: one stacked forward of the encoders and heads (grouped matmuls,
:mod:`agilerl.networks.stacked_mlp`) on every member's rows, every member's clipped-surrogate
loss computed side by side, and one backward through autograd; then each member clips its
slice of the gradient to its own norm and steps its own Adam
(:mod:`agilerl.algorithms.core.member_stacks`).

The backward is autograd's: a closed form of the networks' part (as the DQN update has,
:class:`~agilerl.networks.stacked_mlp_gradient.StackedMLPChain`, with autograd only from the
outputs to the loss) was measured no faster on the bench manifest's networks (4 members of
width 64, minibatches of 128), so it was not kept.

Members whose minibatches differ in size (``batch_size`` and ``learn_step`` are mutable)
are padded to the largest, and every mean, and the advantage normalisation, is over the
member's own rows. Members with fewer minibatches (or an early stop) drop out and the others
go on. So the result equals each member's ``learn`` up to float rounding.

Supported: non-recurrent :class:`~agilerl.algorithms.ppo.PPO`, discrete or continuous
actions, MLP encoders (shared or not) and MLP heads, vector observations. :meth:`key` is
None for anything else.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from agilerl.algorithms.core.clipped_surrogate import UpdateStats, clipped_surrogate_loss
from agilerl.algorithms.core.member_stacks import MemberAdams, MemberStacks, clip_member_grads
from agilerl.algorithms.ppo import PPO
from agilerl.components.rollout_buffer import RolloutBuffer
from agilerl.modules.mlp import EvolvableMLP, MLPEncoder
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.stacked_mlp import (
    StackedLayer,
    gradient_keeper,
    layer_parameters,
    stacked_forward,
    stacked_layers,
)


class _Part(NamedTuple):
    """An encoder or head of the group's architecture: its layers and where its parameters
    lie in a member's parameter list."""

    layers: list[StackedLayer]
    params: slice


def _mlp(module: nn.Module) -> EvolvableMLP:
    """An encoder or head of a stackable network (an MLP, see :func:`_stackable`)."""
    assert isinstance(module, EvolvableMLP)
    return module


def _mlps(net: ActorCritic) -> dict[str, EvolvableMLP]:
    """The network's MLPs in stacking order: its encoders (the policy's first), then the
    policy and value heads."""
    inputs = net.arch["head_inputs"]
    mlps = {f"encoder:{name}": _mlp(net.encoders[name])
            for name in dict.fromkeys((inputs["policy"], inputs["value"]))}
    return {**mlps, "policy": _mlp(net.heads["policy"]), "value": _mlp(net.heads["value"])}


def _obs_tensor(agent: PPO, obs: np.ndarray) -> torch.Tensor:
    """A stackable member's network input: one tensor (see :meth:`StackedPPOGroup.key`)."""
    tensor = agent.to_tensor(obs)
    assert isinstance(tensor, torch.Tensor)
    return tensor


def _member_params(net: ActorCritic) -> list[torch.Tensor]:
    """A member's parameters in stacking order (the log standard deviation last)."""
    params = layer_parameters(list(_mlps(net).values()))
    return [*params, net.log_std] if net.continuous else params


def _stackable(net: nn.Module) -> bool:
    """An actor-critic of MLP encoders and MLP heads whose parameters are all in their
    linear layers and layer norms (and the log standard deviation)."""
    if type(net) is not ActorCritic or set(net.heads) != {"policy", "value"}:
        return False
    if any(type(encoder) is not MLPEncoder for encoder in net.encoders.values()):
        return False
    if any(type(head) is not EvolvableMLP for head in net.heads.values()):
        return False
    if any(True for _ in net.buffers()):
        return False
    return len(_member_params(net)) == len(list(net.parameters()))


class StackedPPOGroup:
    """PPO members with one :meth:`key` (fixed while it lives: build a new group after a
    mutation). :meth:`learn` updates any subset of them at once."""

    @staticmethod
    def key(agent: object) -> Hashable | None:
        """Members with equal keys can learn together; None when this agent cannot.

        The key holds the algorithm, the action kind, the device and the network's
        architecture (its module tree, which encoder feeds each head, parameter shapes).
        """
        if type(agent) is not PPO or agent.recurrent or agent.obs_encoder.composite:
            return None
        net = agent.actor_critic
        if not _stackable(net):
            return None
        shapes = tuple((name, tuple(p.shape), p.dtype) for name, p in net.named_parameters())
        inputs = tuple(sorted(net.arch["head_inputs"].items()))
        return (PPO, bool(agent.continuous), str(agent.device), repr(net), inputs, shapes)

    def __init__(self, agents: Sequence[PPO]) -> None:
        self.agents = list(agents)
        net = self.agents[0].actor_critic
        self.inputs = dict(net.arch["head_inputs"])
        self.continuous = bool(net.continuous)
        self.parts: dict[str, _Part] = {}
        start = 0
        for name, mlp in _mlps(net).items():
            count = len(layer_parameters([mlp]))
            self.parts[name] = _Part(stacked_layers([mlp]), slice(start, start + count))
            start += count
        self.params = [_member_params(a.actor_critic) for a in self.agents]
        self._stacks = MemberStacks([self.params], [True])
        self._adams = MemberAdams()

    def learn(self, members: Sequence[int],
              rollouts: Sequence[RolloutBuffer]) -> list[dict[str, float]]:
        """One PPO update of ``self.agents[m]`` on ``rollouts[i]`` for the i-th ``m`` in
        ``members``; each member's metrics (what its ``learn`` returns), in that order."""
        members = list(members)
        live = [i for i, rollout in enumerate(rollouts)
                if rollout.pos and rollout.valid[: rollout.pos].any()]
        if len(live) < 2:  # nothing to batch: each member's own update (or none)
            return [dict(self.agents[m].learn(r)) for m, r in zip(members, rollouts,
                                                                  strict=True)]
        data = _Rollouts([self.agents[members[i]] for i in live], [rollouts[i] for i in live])
        schedules: dict[int, Iterator[torch.Tensor]] = {
            j: self.agents[members[i]].minibatches(data.sizes[j]) for j, i in enumerate(live)}
        stats = {j: UpdateStats() for j in schedules}
        while schedules:
            step = [(j, idx) for j in list(schedules)
                    if (idx := next(schedules[j], None)) is not None]
            for j in [j for j in schedules if j not in dict(step)]:
                del schedules[j]
            if step:
                for j in self._minibatch_step([members[live[j]] for j, _ in step], data, step,
                                              stats):
                    del schedules[j]  # its KL early stop
        out: list[dict[str, float]] = [{} for _ in members]
        for j, i in enumerate(live):
            out[i] = stats[j].means()
        return out

    def _minibatch_step(self, members: list[int], data: _Rollouts,
                        step: list[tuple[int, torch.Tensor]],
                        stats: dict[int, UpdateStats]) -> list[int]:
        """One gradient step of ``members`` on their minibatches (``step``: per member its
        rollout's index in ``data`` and the minibatch's rows); the rollouts whose member's
        update stops early here (KL above its ``target_kl``)."""
        agents = [self.agents[m] for m in members]
        (params,) = self._stacks.gather(members)
        batch = data.minibatch(step)
        policy_out, value = self._forward(params, batch.obs, agents, batch.sizes)
        log_prob, entropy = self._log_prob_entropy(params, policy_out, batch.actions)
        terms = _surrogate(agents, log_prob, entropy, value, batch)
        terms[0].sum().backward()
        grads = [leaf.grad for leaf in params]
        max_norms = torch.tensor([float(a.max_grad_norm) for a in agents],
                                 device=params[0].device)
        clip_member_grads(grads, max_norms)
        slices = [grad.unbind(0) if grad is not None else None for grad in grads]
        self._adams.step([(m, self.agents[m].optimizers["optimizer"], self.params[m],
                           [s[g] if s is not None else None for s in slices])
                          for g, m in enumerate(members)])
        stopped = []
        rows = torch.stack([t.detach() for t in terms]).T.tolist()
        for (j, _), agent, row in zip(step, agents, rows, strict=True):
            stats[j].add(**dict(zip(UpdateStats.KEYS, row, strict=True)))
            if agent.target_kl is not None and row[4] > agent.target_kl:
                stopped.append(j)
        return stopped

    def _forward(self, params: Sequence[torch.Tensor], obs: torch.Tensor,
                 agents: Sequence[PPO], sizes: Sequence[int] | None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every member's policy output and state value for its rows of ``obs`` (``agents``:
        the members, which keep their gradients for ReGraMa as their own update would, from
        their own ``sizes`` rows)."""
        members = [_mlps(agent.actor_critic) for agent in agents]

        def run(name: str, x: torch.Tensor) -> torch.Tensor:
            part = self.parts[name]
            keep = gradient_keeper([[member[name]] for member in members], sizes)
            return stacked_forward(part.layers, params[part.params], x, keep)

        latents = {name: run(f"encoder:{name}", obs) for name in dict.fromkeys(self.inputs.values())}
        return (run("policy", latents[self.inputs["policy"]]),
                run("value", latents[self.inputs["value"]]).squeeze(-1))

    def _log_prob_entropy(self, params: Sequence[torch.Tensor], policy_out: torch.Tensor,
                          actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row, the log-probability of ``actions`` and the policy's entropy, as
        :meth:`ActorCritic.log_prob_entropy` computes them (each member's own log std)."""
        if not self.continuous:  # the maths reads only the logits
            return self.agents[0].actor_critic.log_prob_entropy(policy_out, actions)
        std = params[-1].exp().unsqueeze(1).expand_as(policy_out)
        dist = torch.distributions.Normal(policy_out, std)
        return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1)


class _Minibatch(NamedTuple):
    """Every stepping member's minibatch as (members, rows, ...) tensors, short ones padded
    (``sizes``: each member's own rows; None when none is padded)."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    sizes: list[int] | None  # rows per member, when short ones are padded


class _Rollouts:
    """The members' flat rollouts, one after another in one tensor per field."""

    def __init__(self, agents: Sequence[PPO], rollouts: Sequence[RolloutBuffer]) -> None:
        datas = [rollout.flat() for rollout in rollouts]
        self.sizes = [len(data["advantages"]) for data in datas]
        self.offsets = [sum(self.sizes[:j]) for j in range(len(datas))]
        self.obs = torch.cat([_obs_tensor(a, d["obs"]) for a, d in zip(agents, datas, strict=True)])
        fields = [a.batch_tensors(d) for a, d in zip(agents, datas, strict=True)]
        self.fields = {k: torch.cat([f[k] for f in fields]) for k in fields[0]}

    def minibatch(self, step: Sequence[tuple[int, torch.Tensor]]) -> _Minibatch:
        sizes = [len(idx) for _, idx in step]
        rows = max(sizes)
        if min(sizes) == rows:
            index = torch.stack([idx + self.offsets[j] for j, idx in step])
        else:  # a short minibatch is padded with its first row, left out of the loss
            index = torch.stack([torch.cat([idx, idx[:1].expand(rows - len(idx))])
                                 + self.offsets[j] for j, idx in step])
        f = self.fields
        return _Minibatch(self.obs[index], f["actions"][index], f["log_probs"][index],
                          f["advantages"][index], f["returns"][index],
                          None if min(sizes) == rows else sizes)


class _Coefficients(NamedTuple):
    """The stepping members' loss coefficients as (members, 1) columns."""

    clip_coef: torch.Tensor
    vf_coef: torch.Tensor
    ent_coef: torch.Tensor


def _surrogate(agents: Sequence[PPO], log_prob: torch.Tensor, entropy: torch.Tensor,
               value: torch.Tensor, batch: _Minibatch) -> list[torch.Tensor]:
    """Per member (tensors of shape (members,)): the terms of
    :func:`~agilerl.algorithms.core.clipped_surrogate.clipped_surrogate_loss` with its own coefficients, in
    one stacked call; a padded minibatch takes one call per member on its own rows."""
    fields = {"log_probs": batch.log_probs, "advantages": batch.advantages,
              "returns": batch.returns}
    if batch.sizes is None:
        coefficients = _Coefficients(*(
            torch.tensor([[float(getattr(a, name))] for a in agents], dtype=torch.float32,
                         device=log_prob.device) for name in _Coefficients._fields))
        return list(clipped_surrogate_loss(coefficients, log_prob, entropy, value, fields))
    members = [clipped_surrogate_loss(
        agent, log_prob[g, :rows], entropy[g, :rows], value[g, :rows],
        {name: field[g, :rows] for name, field in fields.items()})
        for g, (agent, rows) in enumerate(zip(agents, batch.sizes, strict=True))]
    return [torch.stack(term) for term in zip(*members, strict=True)]
