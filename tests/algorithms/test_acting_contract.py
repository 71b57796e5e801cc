"""The ``get_action`` contract of a trained agent: no exploration unless asked for (greedy,
or a sample of a stochastic policy), and one observation of a plain env in, actions that
plain env accepts out."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from agilerl.algorithms import DDPG, DQN, IPPO, MADDPG, MATD3, PPO, TD3, RainbowDQN
from agilerl.algorithms.core.multi_agent import agent_spaces
from agilerl.envs import multi_agent_probe
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv

NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [8]},
       "head_config": {"hidden_size": [8]}}


def _plain_episode_actions(agent, env, seed: int) -> list[dict]:
    """Play one episode of a plain PettingZoo env with ``agent.get_action``; check every
    action against the env's own action space."""
    obs, _ = env.reset(seed=seed)
    played = []
    while env.agents:
        actions = agent.get_action(obs)
        if isinstance(actions, tuple):  # IPPO: (env_actions, actions, log_probs, values)
            actions = actions[0]
        assert set(actions) == set(env.agents)  # actions for the live agents only
        for name, action in actions.items():
            assert env.action_space(name).contains(action), (name, action)
        played.append(actions)
        obs, *_ = env.step(actions)
    return played


@pytest.mark.parametrize("cls", [MADDPG, MATD3])
@pytest.mark.parametrize("config", [{}, {"early_exit": True}, {"action_masks": True}],
                         ids=["plain", "agent-leaves", "action-masks"])
def test_maddpg_acts_on_a_plain_pettingzoo_env_without_noise(cls, config) -> None:
    env = multi_agent_probe.parallel_env(**config)
    agent = cls(*agent_spaces(env), seed=0, net_config=NET)
    first = _plain_episode_actions(agent, env, seed=4)
    again = _plain_episode_actions(agent, env, seed=4)
    # Without noise by default: the continuous agent's action is a function of its
    # observation, the same as greedy_action's; exploring is asked for with training=True.
    # (Discrete agents sample their policy: softmax of the actor's logits.)
    assert [a["pointer_0"].tolist() for a in first] == [a["pointer_0"].tolist() for a in again]
    obs, _ = env.reset(seed=4)
    assert agent.greedy_action(obs)["pointer_0"].tolist() == first[0]["pointer_0"].tolist()
    explored = [agent.get_action(obs, training=True)["pointer_0"] for _ in range(5)]
    assert len({float(a[0]) for a in explored}) > 1
    seekers = {int(agent.get_action(obs)["seeker_0"]) for _ in range(40)}
    assert len(seekers) > 1
    # Unseeded evaluations differ; one with a seed replays the same env and policy samples.
    vector = PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(**config)] * 4)
    assert len({agent.test(vector, loop=2) for _ in range(5)}) > 1
    assert len({agent.test(vector, loop=2, seed=3) for _ in range(5)}) == 1


def test_loaded_ippo_is_deterministic_unless_asked_to_sample(tmp_path) -> None:
    env = multi_agent_probe.parallel_env()
    agent = IPPO(*agent_spaces(env), seed=0, net_config=NET)
    agent.save_checkpoint(tmp_path / "ippo.pt")
    loaded = IPPO.load(tmp_path / "ippo.pt")
    assert loaded.inference and not agent.inference
    first = _plain_episode_actions(loaded, env, seed=1)
    again = _plain_episode_actions(loaded, env, seed=1)
    for a, b in zip(first, again, strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    obs, _ = env.reset(seed=1)
    samples = {float(loaded.get_action(obs, deterministic=False)[0]["pointer_0"][0])
               for _ in range(5)}
    assert len(samples) > 1


@pytest.mark.parametrize("cls", [DQN, RainbowDQN])
def test_discrete_agents_take_one_observation(cls) -> None:
    env = gym.make("CartPole-v1")
    agent = cls(env.observation_space, env.action_space, seed=0, net_config=NET)
    obs, _ = env.reset(seed=0)
    action = agent.get_action(obs)
    assert np.ndim(action) == 0 and env.action_space.contains(action)
    batch = np.stack([obs, obs])
    assert agent.get_action(batch).tolist() == [int(action)] * 2  # greedy by default
    env.step(action)


@pytest.mark.parametrize("cls", [DDPG, TD3])
def test_continuous_agents_take_one_observation_greedily(cls) -> None:
    env = gym.make("Pendulum-v1")
    agent = cls(env.observation_space, env.action_space, seed=0, net_config=NET)
    obs, _ = env.reset(seed=0)
    action = agent.get_action(obs)
    assert action.shape == env.action_space.shape and env.action_space.contains(action)
    assert np.array_equal(agent.get_action(obs), action)
    assert not np.array_equal(agent.get_action(obs, training=True), action)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_loaded_ppo_acts_on_its_mode_unless_asked_to_sample(env_id, tmp_path) -> None:
    env = gym.make(env_id)
    agent = PPO(env.observation_space, env.action_space, seed=0, net_config=NET)
    agent.save_checkpoint(tmp_path / "ppo.pt")
    loaded = PPO.load(tmp_path / "ppo.pt")
    obs, _ = env.reset(seed=0)
    env_action, *_ = loaded.get_action(obs)
    assert env.action_space.contains(env_action)
    assert np.array_equal(np.asarray(env_action), np.asarray(loaded.greedy_action(obs)))
    sampled = {np.asarray(loaded.get_action(obs, deterministic=False)[1]).tobytes()
               for _ in range(8)}
    assert len(sampled) > 1
    # an agent built for training samples by default
    assert len({np.asarray(agent.get_action(obs)[1]).tobytes() for _ in range(8)}) > 1
