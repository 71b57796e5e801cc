"""Multi-Agent DDPG (MADDPG, Lowe et al. 2017): decentralised actors, centralised critics.

Every agent ``i`` has its own deterministic actor ``mu_i(o_i)`` and its own centralised
critic ``Q_i(o_1..o_N, a_1..a_N)`` (:class:`~agilerl.networks.centralised_q.CentralisedQNetwork`),
each with a target copy following it by soft updates (``tau``). Networks are per agent
(agents of a group share their network *configuration*, not their weights: their critics
learn from their own rewards). Every ``learn``:

* critic ``i`` regresses onto ``r_i + gamma * (1 - terminated_i) * Q'_i(o', a')`` with
  ``a'_j = mu'_j(o'_j)`` for every agent (the target policies' actions; a relaxed sample
  for discrete agents);
* every ``policy_freq``-th call (MADDPG: every call), actor ``i`` ascends
  ``Q_i(o, a_1..mu_i(o_i)..a_N)``, the other agents' actions as stored; then every target
  network is soft-updated.

Actions (:mod:`agilerl.algorithms.core.agent_actions`): continuous agents act in
normalised units; discrete agents' actors output logits and act by their Gumbel-softmax
relaxation (MADDPG's original design): critics read the relaxed action vectors, replay
memory stores them, target actions are the target policies' relaxed samples, and acting
without exploration samples the policy rather than taking the argmax of its logits. Every
agent explores with its own OU or Gaussian noise stream per sub-env (the DDPG/TD3
:class:`~agilerl.algorithms.core.action_noise.ActionNoise`) added to its action vector.
An actor's loss is minus its critic's value, plus, for a discrete agent, ``logit_penalty``
times the mean square of its logits (default 1e-3, MADDPG's original code; the reference
library has none: ``docs/training.md`` gives what each choice measured). Action masks
(PettingZoo classic) restrict acting to legal actions, and the target actions at ``o'``
to the actions legal there (the loop stores the next observation's masks with each
transition, field ``next_action_mask``).

Rows of agents that were not live at the observation (they left the episode early) are
masked out of that agent's own losses; their (zero) observations and actions still feed
the other agents' critics. Fitness is the episode return without exploration noise, summed over agents.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar, TypedDict, cast

import numpy as np
import numpy.typing as npt
import torch

from agilerl.algorithms.core.action_noise import ActionNoise, NoiseSettings
from agilerl.algorithms.core.agent_actions import AgentActions
from agilerl.algorithms.core.base import NetworkInput
from agilerl.algorithms.core.multi_agent import (
    NEXT_MASK,
    MultiAgentRLAlgorithm,
    MultiAgentVectorEnv,
)
from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.core.single_obs import acts_on_single
from agilerl.core.value_types import Observation
from agilerl.models._generated.hyperparameter_attributes import MADDPGHyperparameterAttributes
from agilerl.networks.centralised_q import CentralisedQNetwork
from agilerl.networks.config import NetworkConfig
from agilerl.networks.deterministic_actor import DeterministicActor
from agilerl.networks.optim import Adam

#: A sampled batch of joint transitions: field -> agent id -> rows.
JointExperiences = Mapping[str, Mapping[str, np.ndarray]]


class _Batch(TypedDict):
    """A batch of joint transitions as the networks read it: field -> agent id -> tensor."""

    obs: dict[str, NetworkInput]
    next_obs: dict[str, NetworkInput]
    action: dict[str, torch.Tensor]
    reward: dict[str, torch.Tensor]
    done: dict[str, torch.Tensor]
    active: dict[str, torch.Tensor]
    next_mask: dict[str, torch.Tensor]


class _ExtraState(TypedDict, total=False):
    """MADDPG's own part of its state (``extra``)."""

    noise: dict[str, np.ndarray | None]
    learn_counter: int
    acting_rng: dict[str, object]


@registered
class MADDPG(MADDPGHyperparameterAttributes, MultiAgentRLAlgorithm):
    """MADDPG over per-agent (or per-group) observation and action spaces."""

    algo = "MADDPG"
    lr_names = ("lr_actor", "lr_critic")
    optimizer_lrs: ClassVar[dict[str, str]] = {
        "actor_optimizer": "lr_actor", "critic_optimizer": "lr_critic",
    }
    #: The critic roles of each agent (all trained by its ``critic_optimizer``).
    critic_roles: ClassVar[tuple[str, ...]] = ("critic",)
    inert_settings: ClassVar[dict[str, str]] = {
        "vect_noise_dim": "there is always one noise stream per sub-env and agent (the "
                          "number of sub-envs is read from the observations)",
        "torch_compiler": "networks are not compiled in this version (they are small; "
                          "compilation would not speed them up on CPU)",
    }

    #: Critic updates per actor update (MATD3 reads it from its spec).
    policy_freq: int = 1

    def shares_group_networks(self) -> bool:
        return False  # every agent learns its own critic from its own rewards

    # ------------------------------------------------------------------ building
    def _build(self, net_config: NetworkConfig) -> None:
        agents = self.agent_ids
        self.actions = {a: AgentActions(self.action_spaces[a], a, self.device) for a in agents}
        spaces = {a: self.unit_observation_space(a) for a in agents}
        configs = {a: self.unit_net_config(a) for a in agents}
        dims = {a: self.actions[a].dim for a in agents}
        generator = self.network_generator()
        for agent in agents:
            actor = DeterministicActor.build(spaces[agent], dims[agent], configs[agent],
                                             generator, logits=self.actions[agent].discrete)
            self.register_network("actor", agent, actor)
            for index, role in enumerate(self.critic_roles):
                critic = CentralisedQNetwork.build(agents, spaces, dims, configs,
                                                   configs[agent], generator)
                # Twin critics keep one architecture (a mutation of the first applies to all).
                self.register_network(role, agent, critic,
                                      mirror_of=self.critic_roles[0] if index else None)
        for agent in agents:
            for role in ("actor", *self.critic_roles):
                target = copy.deepcopy(self.unit_network(role, agent))
                source = self.critic_roles[0] if role in self.critic_roles else role
                self.register_network(f"{role}_target", agent, target, mirror_of=source)
        # One optimizer per role over every agent's networks: the agents' losses are summed
        # into one backward pass and one fused Adam step. Each agent's loss depends only on
        # its own networks' parameters, so this is exactly a separate step per agent.
        for opt_name, roles in (("actor_optimizer", ("actor",)),
                                ("critic_optimizer", self.critic_roles)):
            self.optimizer_networks[opt_name] = tuple(
                self.network_name(r, a) for a in agents for r in roles)
            self._rebuild_optimizer(opt_name)
        self.noise = {a: ActionNoise(dims[a]) for a in agents}
        # Noise-free acting samples discrete agents' policies from a stream of its own, so
        # that evaluating neither draws from the training stream nor depends on it.
        self.acting_rng = np.random.default_rng(int(self.np_rng.integers(0, 2**62)))
        self.learn_counter = 0

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    def policy(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray]:
        """Every agent's actor output (normalised actions or logits) for a batch."""
        return {
            a: self.unit_network("actor", a)(self.unit_tensor(a, obs)).cpu().numpy()
            for a in self.agent_ids
        }

    @acts_on_single
    def get_action(self, obs: Mapping[str, Observation], training: bool = False
                   ) -> dict[str, np.ndarray]:
        """Env actions, agent id -> batch (a vector env's observations) or agent id -> one
        action (a plain PettingZoo env's: for the agents observed); without exploration
        noise by default (discrete agents still sample their policy), with ``training``
        exploring."""
        return self.act(obs, explore=training)[0]

    def act(
        self, obs: Mapping[str, Observation], *, explore: bool
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Env actions and the action vectors replay memory stores (agent id -> batch),
        with each agent's exploration noise when ``explore``."""
        outputs = self.policy(obs)
        masks = self.action_masks(obs)
        settings = self.noise_settings() if explore else None
        rng = self.np_rng if explore else self.acting_rng
        env_actions, vectors = {}, {}
        for agent in self.agent_ids:
            noise = None
            if settings is not None:
                noise = self.noise[agent].sample(len(outputs[agent]), rng, settings)
            env_actions[agent], vectors[agent] = self.actions[agent].act(
                outputs[agent], noise, rng, masks[agent])
        return env_actions, vectors

    def test(
        self, env: MultiAgentVectorEnv, max_steps: int | None = None, loop: int = 1,
        seed: int | None = None
    ) -> float:
        """Evaluation without exploration noise (see ``MultiAgentRLAlgorithm.test``); with
        ``seed``, discrete agents' policy samples are drawn from that seed, so the same
        weights, env and seed give the same fitness."""
        if seed is not None:
            self.acting_rng = np.random.default_rng(seed)
        return super().test(env, max_steps=max_steps, loop=loop, seed=seed)

    def greedy_action(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray]:  # type: ignore[override]
        """The evaluation action: no exploration noise; a discrete agent's is a sample of
        its policy (from the acting stream), not the argmax of its logits."""
        return self.get_action(obs, training=False)

    def explore_action(self, obs: Any, vector_step: int = 0, settings: Any = None) -> Any:
        """Exploring env actions (agent id -> batch), from each agent's own noise."""
        return self.get_action(obs, training=True)

    def on_episode_end(self, ended: np.ndarray) -> None:
        for noise in self.noise.values():
            noise.reset(ended)

    def noise_settings(self) -> NoiseSettings:
        return NoiseSettings(
            ornstein_uhlenbeck=bool(self.O_U_noise), scale=float(self.expl_noise),
            mean=float(self.mean_noise), theta=float(self.theta), dt=float(self.dt),
        )  # fmt: skip

    def storable(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray]:
        """What replay memory keeps of a batch of joint observations (agent id -> rows)."""
        return {a: self.agent_obs_numpy(a, obs) for a in self.agent_ids}

    def storable_masks(self, obs: Mapping[str, Observation]) -> dict[str, np.ndarray]:
        """The action masks of a batch of joint observations, for the agents that have
        them (agent id -> bool rows; empty when no agent is masked)."""
        return {a: m for a, m in self.action_masks(obs).items() if m is not None}

    # ------------------------------------------------------------------ learning
    def _batch(self, experiences: JointExperiences) -> _Batch:
        device = self.device

        def tensor(value: npt.ArrayLike, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.as_tensor(np.asarray(value), dtype=dtype, device=device)

        agents = self.agent_ids
        return {
            "obs": {a: self.obs_encoders[a](experiences["obs"][a], device) for a in agents},
            "next_obs": {a: self.obs_encoders[a](experiences["next_obs"][a], device)
                         for a in agents},
            "action": {a: self.actions[a].critic_input(tensor(experiences["action"][a]))
                       for a in agents},
            "reward": {a: tensor(experiences["reward"][a]).reshape(-1) for a in agents},
            "done": {a: tensor(experiences["done"][a]).reshape(-1) for a in agents},
            "active": {a: tensor(experiences["active"][a]).reshape(-1) for a in agents},
            "next_mask": {a: tensor(mask, torch.bool)
                          for a, mask in experiences.get(NEXT_MASK, {}).items()},
        }

    def _target_action(
        self, agent: str, next_obs: NetworkInput, next_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Agent's target-policy critic action at ``o'``, legal under ``o'``'s action
        mask when it has one (MATD3 smooths a continuous one)."""
        output = self.unit_network("actor_target", agent)(next_obs)
        return self.actions[agent].policy_action(output, self.torch_rng, mask=next_mask)

    def _next_value(self, agent: str, next_obs: Mapping[str, NetworkInput],
                    next_actions: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.unit_network("critic_target", agent)(next_obs, next_actions)

    def learn(self, experiences: JointExperiences) -> dict[str, float]:
        """One critic step for every agent on a batch of joint transitions (``obs``,
        ``action``, ``reward``, ``next_obs``, ``done``, ``active``: agent id -> rows);
        every ``policy_freq``-th call also an actor step for every agent and a soft update
        of every target. Returns ``loss`` (critics) and, after an actor step,
        ``actor_loss`` (each the mean over agents)."""
        batch = self._batch(experiences)
        agents = self.agent_ids
        with torch.no_grad():
            next_actions = {a: self._target_action(a, batch["next_obs"][a],
                                                   batch["next_mask"].get(a))
                            for a in agents}
            targets = {
                a: batch["reward"][a] + self.gamma * (1.0 - batch["done"][a])
                * self._next_value(a, batch["next_obs"], next_actions)
                for a in agents
            }
        critic_losses = [
            torch.stack([
                _masked_mse(self.unit_network(role, a)(batch["obs"], batch["action"]),
                            targets[a], batch["active"][a])
                for role in self.critic_roles
            ]).sum()
            for a in agents
        ]
        _step(self.optimizers["critic_optimizer"], torch.stack(critic_losses).sum())
        self.learn_counter += 1
        metrics = {"loss": float(torch.stack(critic_losses).detach().mean())}
        if self.learn_counter % int(self.policy_freq) == 0:
            metrics["actor_loss"] = self._actor_step(batch)
            self.soft_update()
        return metrics

    def _actor_step(self, batch: _Batch) -> float:
        """Every actor ascends its own first critic, with the other agents' actions as
        stored; the critics get no gradients."""
        losses = []
        for agent in self.agent_ids:
            output = self.unit_network("actor", agent)(batch["obs"][agent])
            joint = dict(batch["action"])
            joint[agent] = self.actions[agent].policy_action(output, self.torch_rng)
            active = batch["active"][agent]
            critic = self.unit_network(self.critic_roles[0], agent)
            loss = -_masked_mean(critic(batch["obs"], joint), active)
            if self.actions[agent].discrete and self.logit_penalty:
                loss = loss + self.logit_penalty * _masked_mean(output.pow(2).mean(-1), active)
            losses.append(loss)
        optimizer = self.optimizers["actor_optimizer"]
        optimizer.zero_grad(set_to_none=True)
        total = torch.stack(losses).sum()
        total.backward(inputs=optimizer.param_groups[0]["params"])
        optimizer.step()
        return float(torch.stack(losses).detach().mean())

    @torch.no_grad()
    def soft_update(self) -> None:
        """``target <- tau * online + (1 - tau) * target`` for every agent's networks."""
        targets, online = self._target_pairs()
        torch._foreach_lerp_(targets, online, self.tau)

    def _target_pairs(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Target and online parameter lists, cached until a network is replaced."""
        key = tuple(id(n) for n in self.networks.values())
        cache = self.__dict__.get("_pairs")
        if cache is None or cache[0] != key:
            targets: list[torch.Tensor] = []
            online: list[torch.Tensor] = []
            for agent in self.agent_ids:
                for role in ("actor", *self.critic_roles):
                    targets += [p.data for p in self.unit_network(f"{role}_target", agent)
                                .parameters()]
                    online += [p.data for p in self.unit_network(role, agent).parameters()]
            # The tuple of networks keeps their ids unique while the cache lives.
            cache = (key, targets, online, tuple(self.networks.values()))
            self.__dict__["_pairs"] = cache
        return cache[1], cache[2]

    # ------------------------------------------------------------------ state
    def _extra_state(self) -> dict[str, object]:
        return {
            "noise": {a: None if n.state is None else n.state.copy()
                      for a, n in self.noise.items()},
            "learn_counter": self.learn_counter,
            "acting_rng": copy.deepcopy(self.acting_rng.bit_generator.state),
        }

    def _load_extra_state(self, extra: Mapping[str, object]) -> None:
        extra = cast(_ExtraState, extra)  # what _extra_state wrote (or its torch.load)
        for agent, state in dict(extra.get("noise") or {}).items():
            if agent in self.noise:
                self.noise[agent].state = (None if state is None
                                           else np.array(state, dtype=np.float64))
        self.learn_counter = int(extra.get("learn_counter", 0))
        if extra.get("acting_rng") is not None:
            self.acting_rng.bit_generator.state = copy.deepcopy(extra["acting_rng"])


def _masked_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (values * weights).sum() / weights.sum().clamp_min(1.0)


def _masked_mse(values: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return _masked_mean((values - target).pow(2), weights)


def _step(optimizer: Adam, loss: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
