"""The memory probe: cue first, blanks, then a query whose reward depends on the cue."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agilerl.envs  # noqa: F401  (registers the shipped ids)
from agilerl.envs.memory import RepeatFirstObservationEnv


def _episode(env: RepeatFirstObservationEnv, answer) -> tuple[list[np.ndarray], list[float]]:
    obs, _ = env.reset(seed=4)
    seen, rewards, done = [obs], [], False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(answer(seen[0]))
        seen.append(obs)
        rewards.append(reward)
        done = terminated or truncated
    return seen, rewards


def test_only_the_first_observation_shows_the_cue_and_the_last_asks():
    env = RepeatFirstObservationEnv(delay=3, num_cues=3)
    seen, rewards = _episode(env, lambda first: int(np.argmax(first[:3])))
    assert len(rewards) == 4 and rewards == [0.0, 0.0, 0.0, 1.0]
    assert seen[0][:3].sum() == 1 and seen[0][3] == 0
    assert all(not o.any() for o in seen[1:3])
    assert seen[3].tolist() == [0, 0, 0, 1]


def test_a_wrong_answer_costs_one():
    env = RepeatFirstObservationEnv(delay=1)
    _, rewards = _episode(env, lambda first: 1 - int(np.argmax(first[:2])))
    assert rewards == [0.0, -1.0]


def test_registered_with_gymnasium_and_checked():
    env = gym.make("RepeatFirstObservation-v0", delay=2)
    assert env.observation_space.shape == (3,)
    with pytest.raises(ValueError, match="delay >= 1"):
        RepeatFirstObservationEnv(delay=0)


def test_cartpole_no_velocity_is_cartpole_without_the_velocities():
    # Same seed, same actions: CartPoleNoVel-v1 shows CartPole-v1's cart position and pole
    # angle, gets the same rewards and ends at the same step.
    full, masked = gym.make("CartPole-v1"), gym.make("CartPoleNoVel-v1")
    assert masked.observation_space.shape == (2,)
    obs_full, _ = full.reset(seed=7)
    obs_masked, _ = masked.reset(seed=7)
    steps, done = 0, False
    while not done:
        assert obs_masked.tolist() == obs_full[[0, 2]].tolist()
        action = steps % 3 == 0  # a poor policy, so the episode ends by termination
        obs_full, r_full, term_full, trunc_full, _ = full.step(int(action))
        obs_masked, r_masked, term_masked, trunc_masked, _ = masked.step(int(action))
        assert (r_masked, term_masked, trunc_masked) == (r_full, term_full, trunc_full)
        steps, done = steps + 1, term_full or trunc_full
    assert obs_masked.tolist() == obs_full[[0, 2]].tolist()


def test_cartpole_no_velocity_keeps_cartpoles_time_limit():
    env = gym.make("CartPoleNoVel-v1")
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        env.unwrapped.state = np.zeros(4)  # held upright: only the time limit ends it
        _, _, terminated, truncated, _ = env.step(0)
        assert not terminated
        steps += 1
    assert steps == 500
