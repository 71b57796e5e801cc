"""Observation batches (numpy, from a vector env) -> float arrays/tensors the networks take.

Box and MultiBinary observations are flattened, Discrete ones one-hot encoded. Composite
(Tuple/Dict) observations made of those are flattened part by part and concatenated (in
Dict key order), which is how a ``multiinput`` encoder sees them here (see
``agilerl.networks.config``); image parts are not supported yet.

``storable(obs)`` is what replay memory keeps: the raw batch for simple spaces (compact,
e.g. integer states), the flattened float vector for composite ones (one array per row).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces


class IncompatibleSpaceError(ValueError):
    """An algorithm cannot act in an environment's action space (DQN on a Box)."""


def _part_dim(space: gym.Space) -> int:
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.Box) and len(space.shape) == 3:
        raise NotImplementedError(
            "image observations (3-D Box) need a CNN encoder, not supported yet"
        )
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return int(np.prod(space.shape))
    raise NotImplementedError(
        f"observation space {type(space).__name__} is not supported yet "
        "(Box, Discrete, MultiBinary and Tuple/Dict of them are)"
    )


def _flatten_part(space: gym.Space, obs: Any) -> np.ndarray:
    if isinstance(space, spaces.Discrete):
        index = np.asarray(obs, dtype=np.int64).reshape(-1) - int(space.start)
        return np.eye(int(space.n), dtype=np.float32)[index]
    return np.asarray(obs, dtype=np.float32).reshape(len(np.asarray(obs)), -1)


class ObsEncoder:
    """Turns batched observations of ``space`` into ``(batch, dim)`` float inputs."""

    def __init__(self, space: gym.Space):
        self.space = space
        self.parts: list[tuple[Any, gym.Space]] | None = None
        if isinstance(space, spaces.Tuple):
            self.parts = list(enumerate(space.spaces))
        elif isinstance(space, spaces.Dict):
            self.parts = list(space.spaces.items())
        if self.parts is not None:
            self.dim = sum(_part_dim(s) for _, s in self.parts)
        else:
            self.dim = _part_dim(space)
        self._discrete = isinstance(space, spaces.Discrete)

    @property
    def composite(self) -> bool:
        return self.parts is not None

    def numpy(self, obs: Any) -> np.ndarray:
        """The network input as a float32 array of shape ``(batch, dim)``."""
        if self.parts is not None:
            if isinstance(obs, np.ndarray) and obs.ndim == 2 and obs.shape[1] == self.dim:
                return obs.astype(np.float32, copy=False)  # already flattened (from memory)
            return np.concatenate([_flatten_part(s, obs[k]) for k, s in self.parts], axis=1)
        if self._discrete:
            return _flatten_part(self.space, obs)
        return np.asarray(obs, dtype=np.float32).reshape(-1, self.dim)

    def storable(self, obs: Any) -> np.ndarray:
        """What replay memory keeps for a batch of observations."""
        return self.numpy(obs) if self.parts is not None else np.asarray(obs)

    def __call__(self, obs: Any, device: torch.device) -> torch.Tensor:
        return torch.as_tensor(self.numpy(obs), device=device)


def action_dim(space: gym.Space) -> int:
    """Output width of a policy/Q head for ``space``."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape))
    raise NotImplementedError(f"action space {type(space).__name__} is not supported yet")
