"""DQN and PPO must learn the probe environments' analytic answers within seconds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agilerl.algorithms import DQN, PPO
from agilerl.algorithms.core.exploration import EpsilonSchedule
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.envs.probe import make_probe_vector_env
from agilerl.training.experience import (
    train_off_policy_member,
    train_on_policy_member,
)

OBS = torch.tensor([[0.0], [1.0]])
GAMMA = 0.9


def _dqn(env_name: str, net: dict, steps: int = 1200) -> DQN:
    env = make_probe_vector_env(env_name, 4)
    agent = DQN(
        env.single_observation_space, env.single_action_space, net_config=net, seed=0,
        lr=1e-2, batch_size=32, learn_step=2, tau=0.1, gamma=GAMMA,
    )  # fmt: skip
    memory = ReplayBuffer(1000, seed=0)
    train_off_policy_member(
        agent, env, memory, steps, exploration=EpsilonSchedule(1.0, 0.1, 0.99), seed=1
    )
    return agent


@pytest.mark.parametrize(
    ("env_name", "expected"),
    [
        ("ConstantRewardEnv", [[1.0], [None]]),
        ("ObsDependentRewardEnv", [[-1.0], [1.0]]),
        ("DiscountedRewardEnv", [[GAMMA], [1.0]]),
        ("FixedObsPolicyEnv", [[-1.0, 1.0], [None, None]]),
        ("ObsPolicyEnv", [[1.0, -1.0], [-1.0, 1.0]]),
    ],
)
def test_dqn_learns_probe_q_values(env_name, expected, small_net):
    agent = _dqn(env_name, small_net)
    with torch.no_grad():
        q = agent.actor(OBS).numpy()
    for row, want in zip(q, expected, strict=True):
        for value, target in zip(row, want, strict=True):
            if target is not None:  # observation never seen in this env
                assert value == pytest.approx(target, abs=0.15), (env_name, q)


def _ppo(env_name: str, net: dict, steps: int, **hp) -> tuple[PPO, object]:
    env = make_probe_vector_env(env_name, 8)
    params = dict(lr=1e-2, batch_size=64, learn_step=64, gamma=GAMMA, num_envs=8, ent_coef=0.0)
    params.update(hp)
    agent = PPO(
        env.single_observation_space, env.single_action_space, net_config=net, seed=0, **params
    )
    train_on_policy_member(agent, env, steps, seed=1)
    return agent, env


@pytest.mark.parametrize(
    ("env_name", "expected"),
    [
        ("ConstantRewardEnv", [1.0, None]),
        ("ObsDependentRewardEnv", [-1.0, 1.0]),
        ("DiscountedRewardEnv", [GAMMA, 1.0]),
        ("ConstantRewardContEnv", [1.0, None]),
    ],
)
def test_ppo_learns_probe_values(env_name, expected, small_net):
    agent, _ = _ppo(env_name, small_net, 4000)
    with torch.no_grad():
        _, values = agent.actor_critic(OBS)
    for value, target in zip(values.numpy(), expected, strict=True):
        if target is not None:
            assert value == pytest.approx(target, abs=0.15), (env_name, values)


@pytest.mark.parametrize("env_name", ["FixedObsPolicyEnv", "ObsPolicyEnv"])
def test_ppo_learns_discrete_policies(env_name, small_net):
    agent, env = _ppo(env_name, small_net, 4000)
    with torch.no_grad():
        probs = torch.softmax(agent.actor_critic.policy(OBS), dim=-1).numpy()
    if env_name == "FixedObsPolicyEnv":
        assert probs[0, 1] > 0.9
    else:
        assert probs[0, 0] > 0.9 and probs[1, 1] > 0.9
    assert agent.test(env) == pytest.approx(1.0)


@pytest.mark.parametrize("env_name", ["FixedObsPolicyContEnv", "ObsPolicyContEnv"])
def test_ppo_learns_continuous_policies(env_name, small_net):
    agent, env = _ppo(env_name, small_net, 8000, action_std_init=0.5)
    greedy = agent.greedy_action(np.array([[0.0], [1.0]], dtype=np.float32)).reshape(-1)
    if env_name == "FixedObsPolicyContEnv":
        assert greedy[0] == pytest.approx(1.0, abs=0.1)
    else:
        assert greedy == pytest.approx([0.0, 1.0], abs=0.1)
    assert agent.test(env) > -0.01


def test_double_dqn_learns_discounting(small_net):
    env = make_probe_vector_env("DiscountedRewardEnv", 4)
    agent = DQN(
        env.single_observation_space, env.single_action_space, net_config=small_net, seed=0,
        lr=1e-2, batch_size=32, learn_step=2, tau=0.1, gamma=GAMMA, double=True,
    )  # fmt: skip
    train_off_policy_member(agent, env, ReplayBuffer(1000, seed=0), 1200, seed=1)
    with torch.no_grad():
        q = agent.actor(OBS).numpy().reshape(-1)
    assert q == pytest.approx([GAMMA, 1.0], abs=0.15)
