"""The off-policy loop asks the agent how it explores and tells it when episodes end."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from agilerl.algorithms import DQN
from agilerl.algorithms.core.exploration import EpsilonSchedule, epsilon_schedule
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.models import TrainingSpec
from agilerl.models._generated import NULL_MEANS
from agilerl.training.experience import train_off_policy_member
from agilerl.training.off_policy import OffPolicyMemberTrainer


class ThreeStepEnv(gym.Env):
    """Episodes of exactly 3 steps, reward 1 per step."""

    observation_space = spaces.Box(0, 10, (2,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any):
        self.t += 1
        return np.full(2, self.t, np.float32), 1.0, self.t == 3, False, {}


class NoisyAgent(DQN):
    """Explores by its own action noise: no epsilon anywhere (as DDPG/TD3 will)."""

    def get_action(self, obs: Any) -> np.ndarray:  # type: ignore[override]
        return self.greedy_action(obs)

    def greedy_action(self, obs: Any) -> np.ndarray:
        return super().get_action(obs, epsilon=0.0)

    @classmethod
    def exploration_settings(cls, training: Any) -> None:
        return None

    def explore_action(self, obs: Any, vector_step: int, settings: Any = None) -> np.ndarray:
        self.explored.append((vector_step, settings))
        noise = self.np_rng.integers(0, 2, size=len(obs))
        return (self.greedy_action(obs) + noise) % 2

    def on_episode_end(self, ended: np.ndarray) -> None:
        self.resets.append(ended.copy())


def _noisy(env: gym.vector.VectorEnv, small_net: dict) -> NoisyAgent:
    agent = NoisyAgent(env.single_observation_space, env.single_action_space,
                       net_config=small_net, seed=0, batch_size=4, learn_step=2)
    agent.explored, agent.resets = [], []
    return agent


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_loop_drives_a_noise_exploring_agent_and_resets_it_on_episode_ends(mode, small_net):
    env = SyncVectorEnv([ThreeStepEnv, ThreeStepEnv], autoreset_mode=mode)
    agent = _noisy(env, small_net)
    stats = train_off_policy_member(agent, env, ReplayBuffer(100), 24, seed=0)
    assert [step for step, _ in agent.explored] == list(range(12))
    assert stats["learn_updates"] > 0
    # Every finished episode was reported once, for its own sub-env.
    assert sum(int(mask.sum()) for mask in agent.resets) == stats["episodes"] > 0
    assert all(mask.dtype == bool and mask.shape == (2,) for mask in agent.resets)


def test_member_trainer_passes_the_agents_own_settings(small_net):
    env = SyncVectorEnv([ThreeStepEnv, ThreeStepEnv])
    memory = ReplayBuffer(100)
    trainer = OffPolicyMemberTrainer(env, memory, TrainingSpec(eps_start=0.5))
    noisy = _noisy(env, small_net)
    report = trainer(noisy, 12, seed=0)
    assert report.steps == 12 and {s for _, s in noisy.explored} == {None}
    dqn = DQN(env.single_observation_space, env.single_action_space, net_config=small_net,
              seed=0, batch_size=4)
    seen = []
    dqn.get_action = lambda obs, epsilon=0.0: seen.append(epsilon) or np.zeros(2, np.int64)
    trainer(dqn, 6, seed=0)
    assert seen == [0.5, 0.5 * 0.999, 0.5 * 0.999**2]  # eps_decay null -> 0.999


def test_null_epsilon_settings_take_the_schemas_values():
    schedule = epsilon_schedule(TrainingSpec())
    means = NULL_MEANS["TrainingSpec"]
    assert schedule == EpsilonSchedule(means["eps_start"], means["eps_end"], means["eps_decay"])
    assert epsilon_schedule(TrainingSpec(eps_end=0.2)).end == 0.2


def test_an_agent_without_exploration_is_told_so(small_net):
    from agilerl.algorithms import PPO

    env = SyncVectorEnv([ThreeStepEnv])
    ppo = PPO(env.single_observation_space, env.single_action_space, net_config=small_net,
              seed=0, num_envs=1)
    with pytest.raises(NotImplementedError, match="PPO does not implement explore_action"):
        train_off_policy_member(ppo, env, ReplayBuffer(10), 4, seed=0)
