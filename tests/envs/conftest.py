"""Fixtures: a tiny user env package written to a temporary folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

USER_ENV = textwrap.dedent(
    '''
    import gymnasium as gym
    import numpy as np


    class CountEnv(gym.Env):
        """Observation is the step count; terminates after ``limit`` steps."""

        def __init__(self, limit=3, reward=1.0):
            self.limit = limit
            self.reward = reward
            self.observation_space = gym.spaces.Box(0, 100, shape=(1,), dtype=np.float32)
            self.action_space = gym.spaces.Discrete(2)
            self.t = 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.array([0.0], dtype=np.float32), {}

        def step(self, action):
            self.t += 1
            obs = np.array([float(self.t)], dtype=np.float32)
            return obs, self.reward, self.t >= self.limit, False, {}


    def make_count_env(limit=3, reward=1.0):
        return CountEnv(limit=limit, reward=reward)


    class Tag(gym.Wrapper):
        """Records its tag on the innermost env, so tests can see application order."""

        def __init__(self, env, tag="x"):
            super().__init__(env)
            order = getattr(env.unwrapped, "tags", [])
            env.unwrapped.tags = [*order, tag]


    class BoomEnv(CountEnv):
        """Fails on its first step."""

        def step(self, action):
            raise ValueError("boom in step")


    NOT_CALLABLE = 42
    '''
)


@pytest.fixture
def user_env_dir(tmp_path: Path) -> Path:
    """``tmp_path/envs_pkg/custom.py`` holding ``CountEnv``, ``make_count_env`` and ``Tag``."""
    package = tmp_path / "envs_pkg"
    package.mkdir()
    (package / "custom.py").write_text(USER_ENV)
    return tmp_path
