"""LineWorld: walk right along a line to reach the goal (a tiny custom Gymnasium env)."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class LineWorld(gym.Env):
    def __init__(self, size: int = 8):
        self.size = size
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.pos = 0

    def _obs(self):
        return np.array([self.pos / self.size], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(0, min(self.size, self.pos + (1 if action == 1 else -1)))
        done = self.pos == self.size
        return self._obs(), 1.0 if done else -0.01, done, False, {}
