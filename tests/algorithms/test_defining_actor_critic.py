"""The defining features of the continuous actor-critic family, checked against the
textbook formulas on small fixed batches.

* DDPG: the critic regresses onto ``r + gamma * (1 - d) * Q'(s', mu'(s'))`` (target
  policy and target critic); every ``policy_freq``-th learn the actor ascends ``Q`` and the
  targets move by Polyak averaging with ``tau``.
* TD3: the target takes the smaller of the twin target critics at the smoothed target
  action ``clip(mu'(s') + clip(N(0, 0.2), -0.5, 0.5), -1, 1)``; both critics are trained.
* MADDPG: each agent's critic is centralised (every agent's observation and action) and
  bootstraps from every agent's target-policy action at ``o'``.
* MATD3: MADDPG with the twin-critic minimum, target policy smoothing and delayed actors.

DDPG and TD3 learn in closed form (MLP networks, with flat buffers), through autograd
(a network the closed form does not cover: a PReLU) or in closed form without flat
buffers (``share_encoders``): every check runs on each of the three.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms import DDPG, MADDPG, MATD3, TD3

# TD3's target policy smoothing (the TD3 paper's constants, normalised action units).
POLICY_NOISE = 0.2
NOISE_CLIP = 0.5

OBS = spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
ROWS = 256

#: How DDPG and TD3 learn: (activation, share_encoders).
PATHS = {
    "closed-form": ("ReLU", False),
    "autograd": ("PReLU", False),  # a learned slope: outside the closed form
    "shared-encoder": ("ReLU", True),  # closed form, per-tensor soft update
}


def _net(activation: str) -> dict[str, Any]:
    mlp = {"hidden_size": [16], "activation": activation}
    return {"latent_dim": 8, "encoder_config": mlp, "head_config": mlp}


def _single(cls: type[DDPG], path: str, **hp: Any) -> DDPG:
    activation, share = PATHS[path]
    params = {"gamma": 0.9, "tau": 0.25, "policy_freq": 1, "lr_actor": 1e-3,
              "lr_critic": 1e-3, "share_encoders": share, **hp}
    agent = cls(OBS, ACTIONS, net_config=_net(activation), seed=0, **params)
    assert (agent._chains() is None) is (path == "autograd")
    return agent


def _single_batch(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.uniform(-1, 1, (ROWS, 3)).astype(np.float32),
        "action": rng.uniform(ACTIONS.low, ACTIONS.high, (ROWS, 2)).astype(np.float32),
        "reward": rng.normal(size=ROWS).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (ROWS, 3)).astype(np.float32),
        "done": (rng.random(ROWS) < 0.25).astype(np.float32),
    }


@torch.no_grad()
def _perturb(networks: Mapping[str, torch.nn.Module], scale: float, seed: int) -> None:
    """Move ``networks``' weights off the online networks' (and, for actors, towards
    saturation, so that smoothed target actions reach the bounds)."""
    gen = torch.Generator().manual_seed(seed)
    for network in networks.values():
        for p in network.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)


def _perturb_single_targets(agent: DDPG) -> None:
    _perturb({"actor_target": agent.networks["actor_target"]}, 1.0, 1)
    _perturb({n: agent.networks[f"{n}_target"] for n in agent.critic_names}, 0.3, 2)


def _weights(networks: Mapping[str, torch.nn.Module]) -> dict[str, list[torch.Tensor]]:
    return {n: [p.detach().clone() for p in net.parameters()] for n, net in networks.items()}


def _smoothed(action: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """TD3's smoothed target action and the unclipped noise it drew."""
    noise = torch.randn(action.shape, generator=gen) * POLICY_NOISE
    return (action + noise.clamp(-NOISE_CLIP, NOISE_CLIP)).clamp(-1.0, 1.0), noise


def _copy_rng(gen: torch.Generator) -> torch.Generator:
    """A generator in ``gen``'s state: the draws the agent will make next."""
    twin = torch.Generator()
    twin.set_state(gen.get_state())
    return twin


# ---------------------------------------------------------------------- DDPG and TD3
def _bootstrap(agent: DDPG, batch: Mapping[str, np.ndarray]) -> tuple[torch.Tensor, int]:
    """The textbook ``gamma * (1 - d) * min_i Q'_i(s', a')`` with ``a' = mu'(s')`` (TD3:
    smoothed with the noise the agent's generator will draw next), and how many draws the
    noise clip and the bound clip changed."""
    gen = _copy_rng(agent.torch_rng)
    with torch.no_grad():
        next_obs = torch.as_tensor(batch["next_obs"])
        next_action = agent.networks["actor_target"](next_obs)
        clipped = 0
        if isinstance(agent, TD3):
            raw = next_action
            next_action, noise = _smoothed(raw, gen)
            clipped = int((noise.abs() > NOISE_CLIP).sum())
            clipped += int(((raw + noise.clamp(-NOISE_CLIP, NOISE_CLIP)).abs() > 1.0).sum())
        q_next = torch.stack([agent.networks[f"{n}_target"](next_obs, next_action)
                              for n in agent.critic_names]).min(dim=0).values
        return 0.9 * (1.0 - torch.as_tensor(batch["done"])) * q_next, clipped


def _critic_values(agent: DDPG, batch: Mapping[str, np.ndarray]) -> list[torch.Tensor]:
    """Every online critic's ``Q_i(s, a)``, the stored action normalised to [-1, 1]."""
    low, high = torch.as_tensor(ACTIONS.low), torch.as_tensor(ACTIONS.high)
    action = (torch.as_tensor(batch["action"]) - low) / (high - low) * 2.0 - 1.0
    with torch.no_grad():
        obs = torch.as_tensor(batch["obs"])
        return [agent.networks[n](obs, action) for n in agent.critic_names]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cls", [DDPG, TD3])
def test_critic_loss_regresses_every_critic_onto_the_bellman_target(
        cls: type[DDPG], path: str) -> None:
    """Guards the critic loss: every critic (TD3: both) regresses onto the target,
    ``loss = sum_i mean((Q_i(s, a) - y)^2)`` with ``y = r + gamma * (1 - d) *
    min_i Q'_i(s', a')``, and every critic takes a step."""
    agent = _single(cls, path)
    _perturb_single_targets(agent)
    batch = _single_batch()
    bootstrap, _ = _bootstrap(agent, batch)
    y = torch.as_tensor(batch["reward"]) + bootstrap
    expected = sum(float(((q - y) ** 2).mean()) for q in _critic_values(agent, batch))
    critics = _weights({n: agent.networks[n] for n in agent.critic_names})
    assert agent.learn(batch)["loss"] == pytest.approx(expected, rel=1e-5)
    for name, before in critics.items():
        after = list(agent.networks[name].parameters())
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True)), name


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cls", [DDPG, TD3])
def test_critic_target_is_the_target_networks_bootstrap(cls: type[DDPG], path: str) -> None:
    """Guards every term of the critic target: the target policy and target critics,
    ``(1 - d)``, and for TD3 the twin-critic minimum at the smoothed target action
    ``clip(mu'(s') + clip(N(0, 0.2), -0.5, 0.5), -1, 1)``. The rewards are chosen so that
    the textbook target equals ``Q_i(s, a)`` (TD3's second critic is made a copy of the
    first): the critic loss is then zero, and any other target makes it positive."""
    agent = _single(cls, path)
    _perturb_single_targets(agent)
    for name in agent.critic_names[1:]:
        agent.networks[name].load_state_dict(agent.networks[agent.critic_names[0]].state_dict())
    batch = _single_batch()
    bootstrap, clipped = _bootstrap(agent, batch)
    assert cls is DDPG or clipped > 0  # the batch exercises TD3's clips
    batch["reward"] = (_critic_values(agent, batch)[0] - bootstrap).numpy()
    assert agent.learn(batch)["loss"] == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cls", [DDPG, TD3])
def test_targets_follow_by_polyak_averaging_after_the_delayed_actor_step(
        cls: type[DDPG], path: str) -> None:
    """Guards the delayed actor update and the soft target update: with ``policy_freq=2``
    the first learn moves neither the actor nor any target; the second takes the actor
    step and sets every target to ``tau * online + (1 - tau) * target``."""
    agent = _single(cls, path, policy_freq=2, tau=0.25)
    _perturb_single_targets(agent)
    online_names = ["actor", *agent.critic_names]
    targets = _weights({n: agent.networks[f"{n}_target"] for n in online_names})
    actor = _weights({"actor": agent.networks["actor"]})["actor"]
    if agent.share_encoders:  # the actor's encoder follows the critic's on every learn
        actor = [p.detach().clone() for p in agent.networks["actor"].heads.parameters()]
        actor_now = agent.networks["actor"].heads.parameters
    else:
        actor_now = agent.networks["actor"].parameters
    assert "actor_loss" not in agent.learn(_single_batch(0))
    assert all(torch.equal(a, b) for a, b in zip(actor, actor_now(), strict=True))
    for name, before in targets.items():
        now = agent.networks[f"{name}_target"].parameters()
        assert all(torch.equal(a, b) for a, b in zip(before, now, strict=True)), name
    assert "actor_loss" in agent.learn(_single_batch(1))
    assert any(not torch.equal(a, b) for a, b in zip(actor, actor_now(), strict=True))
    for name, before in targets.items():
        online = agent.networks[name].parameters()
        now = agent.networks[f"{name}_target"].parameters()
        for old, new, target in zip(before, online, now, strict=True):
            torch.testing.assert_close(target, 0.75 * old + 0.25 * new.detach(),
                                       rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cls", [DDPG, TD3])
def test_actor_step_ascends_the_first_critic(cls: type[DDPG], path: str) -> None:
    """Guards the deterministic policy gradient's direction: ``actor_loss`` is
    ``-mean(Q1(s, mu(s)))`` before the actor step, and the step raises that value."""
    agent = _single(cls, path, policy_freq=1, lr_actor=1e-3)
    actor_before = copy.deepcopy(agent.networks["actor"])
    batch = _single_batch()
    metrics = agent.learn(batch)
    actor = agent.networks["actor"]
    if agent.share_encoders:  # the actor stepped its head on the critic's new encoder
        actor_before.encoders.load_state_dict(actor.encoders.state_dict())
    critic = agent.networks[agent.critic_names[0]]  # it is not moved by the actor step
    obs = torch.as_tensor(batch["obs"])
    with torch.no_grad():
        before = float(critic(obs, actor_before(obs)).mean())
        after = float(critic(obs, actor(obs)).mean())
    assert metrics["actor_loss"] == pytest.approx(-before, rel=1e-5, abs=1e-6)
    assert after > before


# ---------------------------------------------------------------------- MADDPG and MATD3
MA_OBS = {a: spaces.Box(0.0, 1.0, (2,), np.float32) for a in ("speaker_0", "mover_0",
                                                               "pointer_0")}
MA_ACTIONS = {
    "speaker_0": spaces.Discrete(3),
    "mover_0": spaces.Box(-1.0, 1.0, (2,), np.float32),
    "pointer_0": spaces.Box(-2.0, 2.0, (1,), np.float32),
}
MA_NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [16]},
          "head_config": {"hidden_size": [16]}}


def _multi(cls: type[MADDPG], policy_freq: int = 1, **hp: Any) -> MADDPG:
    """MADDPG has no ``policy_freq`` (an actor step on every learn)."""
    params = {"gamma": 0.9, "tau": 0.25, "lr_actor": 1e-3, "lr_critic": 1e-3, **hp}
    if cls is MATD3:
        params["policy_freq"] = policy_freq
    return cls(MA_OBS, MA_ACTIONS, net_config=MA_NET, seed=0, **params)


def _normalised(agent_id: str, rows: int, rng: np.random.Generator) -> np.ndarray:
    """A batch of critic-side actions: simplex vectors (discrete), [-1, 1] (continuous)."""
    space = MA_ACTIONS[agent_id]
    if isinstance(space, spaces.Discrete):
        return rng.dirichlet(np.ones(int(space.n)), rows).astype(np.float32)
    return rng.uniform(-1, 1, (rows, *space.shape)).astype(np.float32)


def _to_env(agent_id: str, normalised: np.ndarray) -> np.ndarray:
    space = MA_ACTIONS[agent_id]
    if isinstance(space, spaces.Discrete):
        return normalised
    return (space.low + (normalised + 1.0) * (space.high - space.low) / 2.0).astype(np.float32)


def _multi_batch(seed: int = 0) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Any]]:
    """A batch of joint transitions, and the critic-side actions it stores."""
    rng = np.random.default_rng(seed)
    ids = list(MA_OBS)
    actions = {a: _normalised(a, ROWS, rng) for a in ids}
    batch = {
        "obs": {a: rng.uniform(0, 1, (ROWS, 2)).astype(np.float32) for a in ids},
        "action": {a: _to_env(a, actions[a]) for a in ids},
        "reward": {a: rng.normal(size=ROWS).astype(np.float32) for a in ids},
        "next_obs": {a: rng.uniform(0, 1, (ROWS, 2)).astype(np.float32) for a in ids},
        "done": {a: rng.random(ROWS) < 0.25 for a in ids},
        "active": {a: np.ones(ROWS, dtype=bool) for a in ids},
    }
    return batch, {a: torch.as_tensor(v) for a, v in actions.items()}


def _tensors(per_agent: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {a: torch.as_tensor(v) for a, v in per_agent.items()}


def _target_names(agent: MADDPG) -> list[str]:
    return ["actor", *agent.critic_roles]


def _perturb_multi_targets(agent: MADDPG) -> None:
    for i, owner in enumerate(agent.agent_ids):
        _perturb({"a": agent.unit_network("actor_target", owner)}, 1.0, 10 + i)
        _perturb({r: agent.unit_network(f"{r}_target", owner) for r in agent.critic_roles},
                 0.3, 20 + i)


def _multi_bootstrap(agent: MADDPG, batch: Mapping[str, Any]
                     ) -> tuple[dict[str, torch.Tensor], int]:
    """Every agent's textbook ``gamma * (1 - d_i) * min_k Q'_ik(o', a')`` with
    ``a'_j`` from agent j's target actor at ``o'_j`` (discrete: a Gumbel-softmax sample;
    MATD3's continuous: smoothed), drawn as the agent's generator will draw them next, and
    how many draws MATD3's noise clip and bound clip changed."""
    gen = _copy_rng(agent.torch_rng)
    next_obs = _tensors(batch["next_obs"])
    clipped = 0
    with torch.no_grad():
        next_actions = {}
        for a in agent.agent_ids:  # the order the agent draws its noise in
            output = agent.unit_network("actor_target", a)(next_obs[a])
            if isinstance(MA_ACTIONS[a], spaces.Discrete):
                uniform = torch.rand(output.shape, generator=gen).clamp_min(1e-12)
                next_actions[a] = torch.softmax(output - torch.log(-torch.log(uniform)), -1)
            elif isinstance(agent, MATD3):
                next_actions[a], noise = _smoothed(output, gen)
                clipped += int((noise.abs() > NOISE_CLIP).sum())
                clipped += int(((output + noise.clamp(-NOISE_CLIP, NOISE_CLIP)).abs() > 1).sum())
            else:
                next_actions[a] = output
        bootstrap = {}
        for a in agent.agent_ids:
            q_next = torch.stack([agent.unit_network(f"{r}_target", a)(next_obs, next_actions)
                                  for r in agent.critic_roles]).min(dim=0).values
            done = torch.as_tensor(batch["done"][a], dtype=torch.float32)
            bootstrap[a] = 0.9 * (1.0 - done) * q_next
    return bootstrap, clipped


def _multi_values(agent: MADDPG, batch: Mapping[str, Any], actions: Mapping[str, torch.Tensor]
                  ) -> dict[str, list[torch.Tensor]]:
    """Every agent's online critics' values ``Q_ik(o, a)``."""
    obs = _tensors(batch["obs"])
    with torch.no_grad():
        return {a: [agent.unit_network(r, a)(obs, actions) for r in agent.critic_roles]
                for a in agent.agent_ids}


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_centralised_critic_loss_regresses_every_critic_onto_its_target(
        cls: type[MADDPG]) -> None:
    """Guards the multi-agent critic loss: ``loss = mean_i sum_k mean((Q_ik(o, a) -
    y_i)^2)`` with ``y_i = r_i + gamma * (1 - d_i) * min_k Q'_ik(o', a')`` (MATD3: both
    critics of every agent trained)."""
    agent = _multi(cls, policy_freq=1)
    _perturb_multi_targets(agent)
    batch, actions = _multi_batch()
    bootstrap, _ = _multi_bootstrap(agent, batch)
    values = _multi_values(agent, batch, actions)
    expected = np.mean([
        sum(float(((q - torch.as_tensor(batch["reward"][a]) - bootstrap[a]) ** 2).mean())
            for q in values[a])
        for a in agent.agent_ids])
    assert agent.learn(batch)["loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_centralised_critic_target_bootstraps_from_every_target_policy(
        cls: type[MADDPG]) -> None:
    """Guards every term of the centralised critic target: every agent's target action
    from its target actor at ``o'`` (not the stored actions, not the online actors), the
    target critic, ``(1 - d_i)``, and for MATD3 the twin-critic minimum and target policy
    smoothing of continuous agents (noise clip and bound clip). The rewards are chosen so
    that the textbook target equals ``Q_i1(o, a)`` (MATD3's second critics are made copies
    of the first): the critic loss is then zero, and any other target makes it positive."""
    agent = _multi(cls, policy_freq=1)
    _perturb_multi_targets(agent)
    for a in agent.agent_ids:
        for role in agent.critic_roles[1:]:
            first = agent.unit_network(agent.critic_roles[0], a)
            agent.unit_network(role, a).load_state_dict(first.state_dict())
    batch, actions = _multi_batch()
    bootstrap, clipped = _multi_bootstrap(agent, batch)
    assert cls is MADDPG or clipped > 0  # the batch exercises MATD3's clips
    values = _multi_values(agent, batch, actions)
    batch["reward"] = {a: (values[a][0] - bootstrap[a]).numpy() for a in agent.agent_ids}
    assert agent.learn(batch)["loss"] == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_each_agents_critic_reads_every_agents_observation_and_action(
        cls: type[MADDPG]) -> None:
    """Guards the centralised critic: agent i's critics (and their targets) change their
    values when any other agent's observation or action changes."""
    agent = _multi(cls)
    batch, actions = _multi_batch()
    obs = _tensors(batch["obs"])
    roles = [*agent.critic_roles, *(f"{r}_target" for r in agent.critic_roles)]
    with torch.no_grad():
        for owner in agent.agent_ids:
            for role in roles:
                critic = agent.unit_network(role, owner)
                value = critic(obs, actions)
                for other in agent.agent_ids:
                    moved_obs = {**obs, other: 1.0 - obs[other]}
                    moved_action = {**actions, other: actions[other].flip(0)}
                    assert not torch.allclose(critic(moved_obs, actions), value), (owner, other)
                    assert not torch.allclose(critic(obs, moved_action), value), (owner, other)


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_multi_agent_targets_follow_by_polyak_averaging(cls: type[MADDPG]) -> None:
    """Guards the soft update with ``tau`` and its delay: with ``policy_freq=2`` (MATD3)
    the first learn moves no actor and no target; after the actor step every agent's
    targets are ``tau * online + (1 - tau) * target``."""
    freq = 2 if cls is MATD3 else 1
    agent = _multi(cls, policy_freq=freq, tau=0.25)
    _perturb_multi_targets(agent)
    nets = {(r, a): agent.unit_network(r, a)
            for a in agent.agent_ids for r in _target_names(agent)}
    targets = {key: [p.detach().clone() for p in agent.unit_network(f"{key[0]}_target",
                                                                     key[1]).parameters()]
               for key in nets}
    actors = _weights({a: agent.unit_network("actor", a) for a in agent.agent_ids})
    for step in range(freq - 1):
        assert "actor_loss" not in agent.learn(_multi_batch(step)[0])
        for a, before in actors.items():
            now = agent.unit_network("actor", a).parameters()
            assert all(torch.equal(x, y) for x, y in zip(before, now, strict=True)), a
        for (role, a), before in targets.items():
            now = agent.unit_network(f"{role}_target", a).parameters()
            assert all(torch.equal(x, y) for x, y in zip(before, now, strict=True)), (role, a)
    assert "actor_loss" in agent.learn(_multi_batch(freq)[0])
    for (role, a), before in targets.items():
        online = nets[(role, a)].parameters()
        now = agent.unit_network(f"{role}_target", a).parameters()
        for old, new, target in zip(before, online, now, strict=True):
            torch.testing.assert_close(target, 0.75 * old + 0.25 * new.detach(),
                                       rtol=1e-5, atol=1e-6, msg=f"{role} {a}")


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
def test_each_continuous_actor_step_ascends_its_own_centralised_critic(
        cls: type[MADDPG]) -> None:
    """Guards the direction of each actor's step: a continuous agent's new policy raises
    its own first critic's value ``Q_i1(o, a_1..mu_i(o_i)..a_N)``, the other agents'
    actions as stored."""
    agent = _multi(cls, policy_freq=1)
    batch, actions = _multi_batch()
    continuous = [a for a in agent.agent_ids if not isinstance(MA_ACTIONS[a], spaces.Discrete)]
    before = {a: copy.deepcopy(agent.unit_network("actor", a)) for a in continuous}
    assert "actor_loss" in agent.learn(batch)
    obs = _tensors(batch["obs"])
    with torch.no_grad():
        for a in continuous:
            critic = agent.unit_network(agent.critic_roles[0], a)
            old = float(critic(obs, {**actions, a: before[a](obs[a])}).mean())
            new = float(critic(obs, {**actions, a: agent.unit_network("actor", a)(obs[a])}).mean())
            assert new > old, a
