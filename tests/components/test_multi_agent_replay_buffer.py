"""The multi-agent replay buffer: joint transitions, episode boundaries, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv


class _Counter:
    """Two agents; obs = [episode id, step]; the episode of sub-env ``k`` lasts ``3 + k``
    steps, so sub-envs finish at different vector steps."""

    metadata = {"name": "counter"}
    possible_agents = ["a_0", "b_0"]

    def __init__(self, length: int) -> None:
        self.length = length
        self.episode = -1
        self.t = 0
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-1e6, 1e6, shape=(2,), dtype=np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self.episode, self.t], np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):  # type: ignore[no-untyped-def]
        self.episode += 1
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):  # type: ignore[no-untyped-def]
        self.t += 1
        done = self.t >= self.length
        obs = self._obs()
        rewards = {a: 1.0 for a in self.agents}
        term = {a: done for a in self.agents}
        trunc = {a: False for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, term, trunc, {a: {} for a in obs}


def _joint(obs, action, reward, next_obs, done):  # type: ignore[no-untyped-def]
    return {"obs": obs, "action": action, "reward": reward, "next_obs": next_obs, "done": done}


def test_next_step_autoreset_rows_are_never_stored() -> None:
    env = PettingZooVectorEnv([lambda k=k: _Counter(3 + k) for k in range(3)])
    memory = MultiAgentReplayBuffer(1000, seed=0)
    obs, _ = env.reset(seed=0)
    resetting = np.zeros(env.num_envs, dtype=bool)
    for _ in range(40):
        action = {a: np.zeros(env.num_envs, dtype=np.int64) for a in env.agents}
        next_obs, reward, term, trunc, _ = env.step(action)
        valid = ~resetting
        memory.add(_joint(obs, action, reward, next_obs, term), valid=valid)
        resetting = np.all([term[a] | trunc[a] for a in env.agents], axis=0) & valid
        obs = next_obs
    batch = {k: v[: len(memory)] for k, v in memory._data.items()}
    for agent in env.agents:
        before, after = batch[f"obs/{agent}"], batch[f"next_obs/{agent}"]
        # Every stored transition stays within one episode and advances one step.
        np.testing.assert_array_equal(before[:, 0], after[:, 0])
        np.testing.assert_array_equal(before[:, 1] + 1, after[:, 1])
    # Terminal transitions are stored (done with the episode's last observation).
    assert batch["done/a_0"].any()
    # Without the mask, the reset rows would have been stored too: here they are not.
    assert len(memory) < 40 * env.num_envs


def test_sample_keeps_agents_of_one_joint_step_together() -> None:
    memory = MultiAgentReplayBuffer(50, seed=1)
    for step in range(10):
        n = np.arange(4) + 4 * step
        memory.add(_joint({"x": n, "y": -n}, {"x": n % 2, "y": n % 3},
                          {"x": n * 1.0, "y": n * 2.0}, {"x": n + 1, "y": -n - 1},
                          {"x": n > 30, "y": n > 30}))
    batch = memory.sample(64)
    assert set(batch) == {"obs", "action", "reward", "next_obs", "done"}
    assert set(batch["obs"]) == {"x", "y"}
    np.testing.assert_array_equal(batch["obs"]["x"], -batch["obs"]["y"])
    np.testing.assert_array_equal(batch["reward"]["y"], 2 * batch["reward"]["x"])
    np.testing.assert_array_equal(batch["action"]["y"], batch["obs"]["x"] % 3)
    assert memory.agent_ids == ["x", "y"]


def test_state_dict_round_trip_samples_identically() -> None:
    memory = MultiAgentReplayBuffer(8, seed=2)
    for step in range(5):  # wraps the ring
        memory.add(_joint({"x": np.full((3, 2), step)}, {"x": np.arange(3)},
                          {"x": np.ones(3)}, {"x": np.full((3, 2), step + 1)},
                          {"x": np.zeros(3, bool)}))
    copy = MultiAgentReplayBuffer(1, seed=99)
    copy.load_state_dict(memory.state_dict())
    first, second = memory.sample(16), copy.sample(16)
    for field in first:
        np.testing.assert_array_equal(first[field]["x"], second[field]["x"])


def test_a_field_that_is_not_per_agent_is_refused() -> None:
    memory = MultiAgentReplayBuffer(8)
    with pytest.raises(TypeError, match="'reward' must map agent ids"):
        memory.add(obs={"x": np.zeros((1, 2))}, reward=np.zeros(1))
