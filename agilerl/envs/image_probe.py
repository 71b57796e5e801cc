"""``DummyImage-v0``: a small image environment with a known answer, for tests.

Each step shows a 3x32x32 uint8 image (channels first) whose left or right half is bright
(255), the other dark (0), chosen at random. Action 0 means "left", 1 "right"; the reward
is 1 when the action names the bright half, else 0. An episode lasts
:attr:`DummyImageEnv.episode_steps` steps, so a random policy returns about half of that
and a policy that reads the image returns all of it: a CNN agent that learns the task in a
few thousand steps shows that images reach its network intact (shape, channels, scaling).
"""

from __future__ import annotations

from typing import TypeAlias

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ImageObservation: TypeAlias = np.ndarray | dict[str, np.ndarray | int]
"""The image, or :class:`ImageCueDictEnv`'s ``{"image", "flip", "noise"}``."""
ImageStep: TypeAlias = tuple[ImageObservation, float, bool, bool, dict[str, object]]
"""Gymnasium's ``(obs, reward, terminated, truncated, info)``."""


class DummyImageEnv(gym.Env):
    """Name the bright half of the image (see the module docstring)."""

    metadata: dict[str, object] = {"render_modes": []}
    episode_steps = 8
    shape = (3, 32, 32)

    def __init__(self, channels_last: bool = False) -> None:
        c, h, w = self.shape
        self.channels_last = bool(channels_last)
        shape = (h, w, c) if self.channels_last else (c, h, w)
        self.observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)
        self.action_space = spaces.Discrete(2)
        self._side = 0
        self._t = 0

    def _observation(self) -> np.ndarray:
        self._side = int(self.np_random.integers(0, 2))
        c, h, w = self.shape
        image = np.zeros((c, h, w), dtype=np.uint8)
        half = w // 2
        image[:, :, self._side * half : (self._side + 1) * half] = 255
        return np.ascontiguousarray(image.transpose(1, 2, 0)) if self.channels_last else image

    def reset(self, *, seed: int | None = None, options: dict[str, object] | None = None
              ) -> tuple[ImageObservation, dict[str, object]]:
        super().reset(seed=seed)
        self._t = 0
        return self._observation(), {}

    def step(self, action: int | np.integer) -> ImageStep:
        reward = 1.0 if int(action) == self._side else 0.0
        self._t += 1
        terminated = self._t >= self.episode_steps
        return self._observation(), reward, terminated, False, {}


class ImageCueDictEnv(DummyImageEnv):
    """Multi-input probe: ``Dict(image=..., flip=Discrete(2), noise=Box(2,))``.

    The right action is the bright half (0 left, 1 right) XOR ``flip``, so a policy must
    read both the image and the discrete part (the vector part is noise); reward 1 for the
    right action, else 0, over :attr:`episode_steps` steps.
    """

    def __init__(self, channels_last: bool = False) -> None:
        super().__init__(channels_last)
        self.observation_space = spaces.Dict(
            {
                "image": self.observation_space,
                "flip": spaces.Discrete(2),
                "noise": spaces.Box(-1.0, 1.0, (2,), dtype=np.float32),
            }
        )
        self._flip = 0

    def _observation(self) -> dict[str, np.ndarray | int]:  # type: ignore[override]
        image = super()._observation()
        self._flip = int(self.np_random.integers(0, 2))
        noise = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return {"image": image, "flip": self._flip, "noise": noise}

    def step(self, action: int | np.integer) -> ImageStep:
        reward = 1.0 if int(action) == (self._side ^ self._flip) else 0.0
        self._t += 1
        terminated = self._t >= self.episode_steps
        return self._observation(), reward, terminated, False, {}
