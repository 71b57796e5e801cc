"""Experience collection: autoreset handling, step accounting, epsilon schedule."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from agilerl.algorithms import DQN, PPO
from agilerl.algorithms.core.exploration import EpsilonSchedule
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.training.experience import (
    train_off_policy_member,
    train_on_policy_member,
)


class CounterEnv(gym.Env):
    """Observation = (episode id, step in episode); episodes last 3 steps, the last one of
    every second episode is a truncation. Reward = 1 per step."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 1e6, (2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.episode = -1
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.episode, self.t], dtype=np.float32)

    def step(self, action: Any):
        self.t += 1
        end = self.t == 3
        truncated = end and self.episode % 2 == 1
        return self._obs(), 1.0, end and not truncated, truncated, {}


def _env(mode: AutoresetMode, n: int = 2) -> SyncVectorEnv:
    return SyncVectorEnv([CounterEnv for _ in range(n)], autoreset_mode=mode)


def _agent(env: gym.vector.VectorEnv, small_net: dict, cls: type = DQN, **hp: Any):
    return cls(
        env.single_observation_space, env.single_action_space, net_config=small_net, seed=0, **hp
    )


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_stored_transitions_never_cross_episodes(mode, small_net):
    env = _env(mode)
    agent = _agent(env, small_net, batch_size=10_000)  # never learns
    memory = ReplayBuffer(1000)
    stats = train_off_policy_member(agent, env, memory, 40, seed=0)
    data = memory.state_dict()["data"]
    obs, next_obs, done = data["obs"], data["next_obs"], data["done"]
    assert np.all(next_obs[:, 0] == obs[:, 0])  # same episode id
    assert np.all(next_obs[:, 1] == obs[:, 1] + 1)  # one step later
    # terminated only at the end of even episodes; truncation is not a terminal
    assert np.array_equal(done, (next_obs[:, 1] == 3) & (next_obs[:, 0] % 2 == 0))
    assert stats["steps"] == 40 and agent.steps[-1] == 40
    assert stats["score"] == pytest.approx(3.0)
    # next-step mode: each sub-env spends one step per finished episode on its reset
    assert len(memory) == (40 if mode == AutoresetMode.SAME_STEP else 30)


def test_both_autoreset_modes_store_the_same_transitions(small_net):
    stored = {}
    for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        env = _env(mode, n=1)
        memory = ReplayBuffer(1000)
        train_off_policy_member(_agent(env, small_net, batch_size=10_000), env, memory, 16, seed=0)
        data = memory.state_dict()["data"]
        stored[mode] = {tuple(o) for o in data["obs"].tolist()}
    # next-step mode spends one env step per episode on the reset, so it sees a prefix
    assert stored[AutoresetMode.NEXT_STEP] <= stored[AutoresetMode.SAME_STEP]


def test_rollout_bootstraps_truncation_and_masks_reset_steps(small_net):
    env = _env(AutoresetMode.NEXT_STEP, n=1)
    agent = _agent(env, small_net, cls=PPO, learn_step=8, batch_size=8, num_envs=1, gamma=0.5)
    seen = {}

    def capture(rollout):
        seen.update(
            rewards=rollout.rewards[:, 0].copy(),
            valid=rollout.valid[:, 0].copy(),
            ended=rollout.ended[:, 0].copy(),
        )
        return {}

    agent.learn = capture
    train_on_policy_member(agent, env, 8, seed=0)
    # steps: e0 t1,t2,t3(term) | reset | e1 t1,t2,t3(trunc) | reset
    assert seen["valid"].tolist() == [True, True, True, False, True, True, True, False]
    assert seen["ended"].tolist() == [0, 0, 1, 0, 0, 0, 1, 0]
    assert seen["rewards"][2] == 1.0
    assert seen["rewards"][6] != 1.0  # 1 + gamma * V(final obs)


def test_learn_frequency_and_epsilon_schedule(small_net):
    env = _env(AutoresetMode.NEXT_STEP, n=4)
    agent = _agent(env, small_net, batch_size=4, learn_step=2)
    stats = train_off_policy_member(agent, env, ReplayBuffer(1000), 40, seed=0)
    assert stats["learn_updates"] == 2 * 10  # 4 envs / learn_step 2, every vector step
    agent = _agent(env, small_net, batch_size=4, learn_step=8)
    stats = train_off_policy_member(agent, env, ReplayBuffer(1000), 40, seed=0)
    assert stats["learn_updates"] == 5  # one every 2 vector steps
    eps = EpsilonSchedule(1.0, 0.1, 0.5)
    assert eps.value(0) == 1.0 and eps.value(1) == 0.5 and eps.value(10) == 0.1
    agent = _agent(env, small_net, batch_size=10_000)
    stats = train_off_policy_member(
        agent, env, ReplayBuffer(1000), 40, learning_delay=10_000, seed=0
    )
    assert stats["learn_updates"] == 0


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_composite_observations_flow_through_both_paradigms(mode, small_net):
    """Tuple observations (Blackjack) are stored part by part, as integer indices (the
    multiinput encoder one-hot encodes them on the network's device)."""
    env = gym.make_vec(
        "Blackjack-v1",
        num_envs=3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
    )
    net = dict(small_net, arch="multiinput", encoder_config={"mlp_config": {"hidden_size": [16]}})
    dqn = _agent(env, net, batch_size=8, learn_step=3)
    memory = ReplayBuffer(500)
    stats = train_off_policy_member(
        dqn, env, memory, 60, exploration=EpsilonSchedule(1, 0.1, 0.9), seed=0
    )
    stored = memory.state_dict()["data"]["obs"]
    assert stored.dtype.names == ("0", "1", "2")
    assert all(stored.dtype[name] == np.int64 for name in stored.dtype.names)
    assert stored["0"].max() < 32 and stored["1"].max() < 11 and stored["2"].max() < 2
    assert stats["learn_updates"] > 0 and stats["episodes"] > 0
    ppo = _agent(env, net, cls=PPO, learn_step=30, batch_size=10, num_envs=3)
    assert train_on_policy_member(ppo, env, 30, seed=0)["learn_updates"] == 1
    assert DQN.from_state(dqn.get_state()).greedy_action(env.reset(seed=0)[0]).shape == (3,)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_evaluation_counts_one_episode_per_sub_env_and_round(mode, small_net):
    env = _env(mode, n=3)
    agent = _agent(env, small_net)
    assert agent.test(env, loop=2) == pytest.approx(3.0)  # every episode returns 3
    assert agent.test(env, max_steps=2) == pytest.approx(2.0)  # capped: partial returns
    assert agent.fitness == [pytest.approx(3.0), pytest.approx(2.0)]


def test_action_mask_limits_greedy_and_random_actions(small_net):
    env = _env(AutoresetMode.NEXT_STEP, n=4)
    agent = _agent(env, small_net)
    obs = np.zeros((4, 2), dtype=np.float32)
    mask = np.array([[True, False]] * 4)
    for eps in (0.0, 1.0):
        assert (agent.get_action(obs, epsilon=eps, action_mask=mask) == 0).all()
