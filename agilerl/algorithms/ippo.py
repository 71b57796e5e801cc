"""Independent PPO (IPPO): one clipped-PPO learner per network unit of a multi-agent env.

Each unit (a group of homogeneous agents sharing one actor-critic, or a single agent when
``share_group_networks`` is false; see ``agilerl.algorithms.core.multi_agent``) has an
``ActorCritic`` network ``actor_critic.<unit>`` (separate actor and critic encoders) and its
own Adam ``optimizer.<unit>`` at learning rate ``lr``. Agents learn from their own rewards
only (no centralised critic): a unit's update pools the transitions of all its agents.

The maths per unit is PPO's: GAE advantages (``gamma``/``gae_lambda``, per agent),
``update_epochs`` passes over shuffled minibatches of ``batch_size``, clipped surrogate
+ ``vf_coef`` * value loss - ``ent_coef`` * entropy, gradient clipping at
``max_grad_norm``, early stop on approximate KL > ``target_kl``; with ``anneal_lr`` the
learning rate decays linearly to zero over the run, as PPO's. Discrete actions honour
action masks (illegal logits are set to the dtype's minimum before sampling, in the
stored log-probabilities and in the update).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np
import torch
from gymnasium import spaces

from agilerl.algorithms.core.base import NetworkInput
from agilerl.algorithms.core.clipped_surrogate import (
    UpdateStats,
    clipped_surrogate_loss,
    closed_form_step,
)
from agilerl.algorithms.core.multi_agent import MultiAgentRLAlgorithm
from agilerl.algorithms.core.policy_sampling import categorical_action, gaussian_action
from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.components.rollout_buffer import RolloutBuffer
from agilerl.core.spaces import IncompatibleSpaceError, action_dim
from agilerl.core.value_types import Observation
from agilerl.models._generated.hyperparameter_attributes import IPPOHyperparameterAttributes
from agilerl.networks.actor_critic import ActorCritic
from agilerl.networks.config import NetworkConfig
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.mlp_gradient import cached_chain
from agilerl.networks.policy_value_gradient import PolicyValueChain

#: Rollout of one agent (``RolloutBuffer`` plus, for masked discrete actions, the masks).
AgentRollouts = Mapping[str, RolloutBuffer]


@registered
class IPPO(IPPOHyperparameterAttributes, MultiAgentRLAlgorithm):
    """Independent PPO over the units of a multi-agent env (see the module docstring)."""

    algo = "IPPO"
    inert_settings = {
        "torch_compiler": "networks are not compiled in this version (small MLPs and CNNs "
                          "run eagerly faster than the compile takes)",
        "action_batch_size": "every agent of a unit acts in one forward pass already",
    }

    def shares_group_networks(self) -> bool:
        return bool(self.share_group_networks)

    def _build(self, net_config: NetworkConfig) -> None:
        self.continuous: dict[str, bool] = {}
        for unit in self.units:
            space = self.unit_action_space(unit)
            if not isinstance(space, (spaces.Discrete, spaces.Box)):
                raise IncompatibleSpaceError(
                    f"IPPO needs Discrete or Box action spaces; agent "
                    f"{self.units[unit][0]!r} has {space}")
            self.continuous[unit] = isinstance(space, spaces.Box)
            network = ActorCritic.build(
                self.unit_observation_space(unit),
                action_dim(space),
                continuous=self.continuous[unit],
                net_config=self.unit_net_config(unit),
                share_encoders=False,
                action_std_init=self.action_std_init,
                generator=self.network_generator(),
            )
            self.register_network("actor_critic", unit, network)
            self.register_optimizer("optimizer", unit, ("actor_critic",))

    def _net(self, unit: str) -> ActorCritic:
        return cast(ActorCritic, self.unit_network("actor_critic", unit))

    # ------------------------------------------------------------------ acting
    def _chain(self, unit: str) -> PolicyValueChain | None:
        """The unit's network's closed-form chain (None: not an MLP actor-critic)."""
        return cached_chain(self, self._net(unit), f"_chain.{unit}", PolicyValueChain.of)

    def _outputs(self, unit: str, obs: NetworkInput) -> tuple[torch.Tensor, torch.Tensor]:
        chain = self._chain(unit)
        if chain is not None and isinstance(obs, torch.Tensor) and obs.dim() == 2:
            return chain.run(obs)  # the same kernels, without the modules' dispatch
        return self._net(unit)(obs)

    def _policy(self, unit: str, obs: Mapping[str, Observation]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy output (masked logits, or Gaussian mean) and values of the unit's agents."""
        policy_out, value = self._outputs(unit, self.unit_tensor(unit, obs))
        return self._mask_policy(unit, obs, policy_out), value

    def _mask_policy(
        self, unit: str, obs: Mapping[str, Observation], policy_out: torch.Tensor
    ) -> torch.Tensor:
        mask = self.unit_action_mask(unit, obs)
        if mask is None:
            return policy_out
        return _masked(policy_out, torch.as_tensor(mask, device=policy_out.device))

    @acts_on_single
    @torch.inference_mode()
    def get_action(self, obs: Mapping[str, Observation], *, deterministic: bool | None = None
                   ) -> tuple[dict[str, np.ndarray], ...]:
        """Actions for every agent: ``(env_actions, actions, log_probs, values)``, each
        agent id -> batch over sub-envs (a plain PettingZoo env's observations: agent id
        -> one value, for the agents observed). ``actions`` (raw samples) are what the
        rollout stores; ``env_actions`` go to ``env.step``. Sampled, or with
        ``deterministic`` the policy's mode; by default deterministic when the agent was
        loaded for inference (``inference``)."""
        env_actions, actions, log_probs, values = {}, {}, {}, {}
        mode = self.inference if deterministic is None else deterministic
        for unit in self.units:
            policy_out, value = self._policy(unit, obs)
            if self.continuous[unit]:
                raw, log_prob = gaussian_action(policy_out, self._net(unit).log_std, mode,
                                                self.torch_rng)
            else:
                raw, log_prob = categorical_action(policy_out, mode, self.np_rng)
            actions.update(self.split_unit(unit, raw))
            log_probs.update(self.split_unit(unit, log_prob))
            values.update(self.split_unit(unit, value.cpu().numpy()))
            env_actions.update(self.split_unit(unit, self._env_action(unit, raw)))
        return env_actions, actions, log_probs, values

    @acts_on_single
    @torch.inference_mode()
    def greedy_action(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray]:  # type: ignore[override]
        """The policy's mode for every agent (argmax legal logit, or the Gaussian mean)."""
        out: dict[str, np.ndarray] = {}
        for unit in self.units:
            # The actor alone: evaluation needs no values (half the work with two encoders).
            policy_out = self._net(unit).policy(self.unit_tensor(unit, obs))
            policy_out = self._mask_policy(unit, obs, policy_out)
            if self.continuous[unit]:
                rows = self._env_action(unit, policy_out.cpu().numpy())
            else:
                rows = policy_out.argmax(dim=-1).cpu().numpy()
            out.update(self.split_unit(unit, rows))
        return out

    @torch.inference_mode()
    def get_value(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray]:
        """State values of every agent (to bootstrap truncated episodes and rollouts)."""
        out: dict[str, np.ndarray] = {}
        for unit in self.units:
            _, value = self._outputs(unit, self.unit_tensor(unit, obs))
            out.update(self.split_unit(unit, value.cpu().numpy()))
        return out

    def _env_action(self, unit: str, raw: np.ndarray) -> np.ndarray:
        if not self.continuous[unit]:
            return raw
        box = cast(spaces.Box, self.unit_action_space(unit))
        low, high = box.low.reshape(-1), box.high.reshape(-1)
        if self._net(unit).arch["extra"]["squash_output"]:
            scaled = low + (np.tanh(raw) + 1.0) * 0.5 * (high - low)
        else:
            scaled = np.clip(raw, low, high)
        return scaled.reshape((-1, *box.shape)).astype(box.dtype)

    # ------------------------------------------------------------------ learning
    def learn(  # type: ignore[override]
        self, rollouts: AgentRollouts, masks: Mapping[str, np.ndarray] | None = None
    ) -> dict[str, float]:
        """One PPO update per unit from its agents' rollouts (advantages computed).

        ``masks``: agent id -> the action masks of its stored steps, ``(steps, num_envs,
        n)`` (masked discrete agents). Returns the metrics averaged over units.
        """
        per_unit = []
        for unit, agents in self.units.items():
            buffers = [rollouts[a] for a in agents]
            merged = {key: _gather(buffers, key) for key in _LEARN_KEYS}
            if not len(merged["advantages"]):
                continue
            unit_masks = None
            if masks is not None and all(masks.get(a) is not None for a in agents):
                unit_masks = np.concatenate([_flat_mask(rollouts[a], masks[a]) for a in agents])
            per_unit.append(self._learn_unit(unit, _ValidRows(buffers), merged, unit_masks))
        if not per_unit:
            return {}
        return {k: float(np.mean([m[k] for m in per_unit])) for k in per_unit[0]}

    def _learn_unit(
        self, unit: str, obs: _ValidRows, data: dict[str, np.ndarray], masks: np.ndarray | None
    ) -> dict[str, float]:
        """PPO epochs over the unit's valid rows. Observations are read from the rollouts
        a minibatch at a time (image rollouts stay in their stored dtype; only a
        minibatch is ever converted for the network)."""
        net, continuous = self._net(unit), self.continuous[unit]
        n = len(data["advantages"])
        encoder = self.obs_encoders[unit]
        dtype = torch.float32 if continuous else torch.long
        batch = {
            "actions": torch.as_tensor(data["actions"], dtype=dtype, device=self.device),
            "log_probs": torch.as_tensor(data["log_probs"], device=self.device),
            "advantages": torch.as_tensor(data["advantages"], device=self.device),
            "returns": torch.as_tensor(data["returns"], device=self.device),
        }
        if masks is not None:
            batch["masks"] = torch.as_tensor(masks, device=self.device)
        stats: dict[str, list[float]] = {}
        batch_size = max(1, min(int(self.batch_size), n))
        chain = self._chain(unit)
        flat = self._flat_training(unit) if chain is not None else None
        if flat is not None:
            flat.attach_grads()
        for _epoch in range(int(self.update_epochs)):
            order = torch.randperm(n, generator=self.torch_rng)
            for start in range(0, n, batch_size):
                rows = order[start : start + batch_size]
                idx = rows.to(self.device)
                minibatch = {k: v[idx] for k, v in batch.items()}
                net_input = encoder(obs.take(rows.numpy()), self.device)
                if chain is not None and flat is not None and isinstance(net_input, torch.Tensor):
                    legal = _legal(minibatch["masks"]) if "masks" in minibatch else None
                    step = _step_metrics(closed_form_step(self, chain, flat, net_input,
                                                          minibatch, legal))
                else:
                    policy_out, value = net(net_input)
                    if "masks" in minibatch:
                        policy_out = _masked(policy_out, minibatch["masks"])
                    step = self._update(unit, policy_out, value, minibatch)
                for key, val in step.items():
                    stats.setdefault(key, []).append(val)
                if self.target_kl is not None and step["approx_kl"] > self.target_kl:
                    return {k: float(np.mean(v)) for k, v in stats.items()}
        return {k: float(np.mean(v)) for k, v in stats.items()}

    def _update(
        self, unit: str, policy_out: torch.Tensor, value: torch.Tensor,
        batch: dict[str, torch.Tensor],
    ) -> dict[str, float]:
        """One gradient step of the unit's actor-critic on a minibatch."""
        net = self._net(unit)
        dist = net.distribution(policy_out)
        log_prob, entropy = dist.log_prob(batch["actions"]), dist.entropy()
        if self.continuous[unit]:
            log_prob, entropy = log_prob.sum(-1), entropy.sum(-1)
        terms = clipped_surrogate_loss(self, log_prob, entropy, value, batch)
        optimizer = self.optimizers[self.network_name("optimizer", unit)]
        optimizer.zero_grad(set_to_none=True)
        terms.loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), self.max_grad_norm)
        optimizer.step()
        return _step_metrics(terms.floats())

    def _flat_training(self, unit: str) -> FlatTraining | None:
        """The unit's network's parameters, gradients and Adam state in flat buffers (see
        :mod:`agilerl.networks.flat_params`), rebuilt when either was replaced."""
        net, optimizer = self._net(unit), self.optimizers[self.network_name("optimizer", unit)]
        flats: dict[str, FlatTraining | None] = self.__dict__.setdefault("_flat_units", {})
        flat = flats[unit] = FlatTraining.current(flats.get(unit), net, None, optimizer)
        return flat


def _step_metrics(terms: list[float]) -> dict[str, float]:
    """A minibatch step's metrics from its terms (in :class:`SurrogateTerms`'s order):
    what IPPO reports, no clipped fraction."""
    return {key: value for key, value in zip(UpdateStats.KEYS, terms, strict=True)
            if key != "clipfrac"}


def _legal(mask: torch.Tensor) -> torch.Tensor:
    """The actions a row may take: those ``mask`` allows; every action in a row with no
    legal action (nothing to choose from: the env ignores it)."""
    mask = mask.to(torch.bool)
    return mask | ~mask.any(dim=-1, keepdim=True)


def _masked(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Logits with illegal actions (``mask`` False) at the dtype's minimum (see
    :func:`_legal`)."""
    return logits.masked_fill(~_legal(mask), torch.finfo(logits.dtype).min)


_LEARN_KEYS = ("actions", "log_probs", "advantages", "returns")


class _ValidRows:
    """The valid observation rows of several agents' rollouts, one agent after the other
    (the order of :func:`_gather`), read by row number without copying the rollouts."""

    def __init__(self, buffers: list[RolloutBuffer]) -> None:
        self.parts = [b.obs[: b.pos].reshape(-1, *b.obs.shape[2:]) for b in buffers]
        self.rows = [np.flatnonzero(b.valid[: b.pos].reshape(-1)) for b in buffers]
        self.starts = np.cumsum([0, *(len(r) for r in self.rows)])

    def take(self, index: np.ndarray) -> np.ndarray:
        """Rows ``index`` (positions among all valid rows) as one new array."""
        first = self.parts[0]
        out = np.empty((len(index), *first.shape[1:]), dtype=first.dtype)
        part_of = np.searchsorted(self.starts, index, side="right") - 1
        for k, (part, rows) in enumerate(zip(self.parts, self.rows, strict=True)):
            where = np.flatnonzero(part_of == k)
            if len(where):
                out[where] = part[rows[index[where] - self.starts[k]]]
        return out


def _gather(buffers: list[RolloutBuffer], key: str) -> np.ndarray:
    """The valid rows of ``key`` of several agents' rollouts, one after the other, copied
    once (images are the bulk of a rollout: no intermediate per-agent copies)."""
    parts = []
    for buffer in buffers:
        array = getattr(buffer, key)[: buffer.pos]
        parts.append((array.reshape(-1, *array.shape[2:]), buffer.valid[: buffer.pos].reshape(-1)))
    first = parts[0][0]
    out = np.empty((sum(int(v.sum()) for _, v in parts), *first.shape[1:]), dtype=first.dtype)
    start = 0
    for rows, valid in parts:
        stop = start + int(valid.sum())
        np.compress(valid, rows, axis=0, out=out[start:stop])
        start = stop
    return out


def _flat_mask(rollout: RolloutBuffer, masks: np.ndarray) -> np.ndarray:
    """An agent's stored masks ``(steps, num_envs, n)`` -> the rows ``rollout.flat`` keeps."""
    valid = rollout.valid[: rollout.pos].reshape(-1)
    return masks[: rollout.pos].reshape(-1, masks.shape[-1])[valid]
