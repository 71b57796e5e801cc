"""Observation batches (numpy, from a vector env) -> float tensors the networks take."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces


class ObsEncoder:
    """Flattens Box observations and one-hot encodes Discrete ones, batched."""

    def __init__(self, space: gym.Space):
        self.space = space
        if isinstance(space, spaces.Box):
            self.dim = int(np.prod(space.shape))
            self._discrete = 0
        elif isinstance(space, spaces.Discrete):
            self.dim = int(space.n)
            self._discrete = int(space.n)
        elif isinstance(space, spaces.MultiBinary):
            self.dim = int(np.prod(space.shape))
            self._discrete = 0
        else:
            raise NotImplementedError(
                f"observation space {type(space).__name__} is not supported yet "
                "(Box, Discrete and MultiBinary are)"
            )

    def numpy(self, obs: Any) -> np.ndarray:
        """The network input as a float32 array of shape ``(batch, dim)``."""
        if self._discrete:
            index = np.asarray(obs, dtype=np.int64).reshape(-1)
            return np.eye(self._discrete, dtype=np.float32)[index]
        return np.asarray(obs, dtype=np.float32).reshape(-1, self.dim)

    def __call__(self, obs: Any, device: torch.device) -> torch.Tensor:
        if self._discrete:
            index = torch.as_tensor(np.asarray(obs), dtype=torch.long, device=device).reshape(-1)
            return torch.nn.functional.one_hot(index, self._discrete).float()
        array = np.asarray(obs, dtype=np.float32)
        return torch.as_tensor(array, device=device).reshape(-1, self.dim)


def action_dim(space: gym.Space) -> int:
    """Output width of a policy/Q head for ``space``."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    raise NotImplementedError(f"action space {type(space).__name__} is not supported yet")
