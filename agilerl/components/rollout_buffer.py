"""Rollout storage for on-policy learning from a vector env, with GAE.

Arrays are ``(num_steps, num_envs, ...)`` and preallocated. Each step stores the
observation the action was taken in (as ``ObsEncoder.numpy`` gives it: flat float32
vectors, images in their own dtype, structured rows for Tuple/Dict spaces), the stored action (for PPO the raw Gaussian sample),
its log-probability, the value estimate, the reward, whether the episode ended there, and
a ``valid`` flag: False for Gymnasium's NEXT_STEP autoreset steps, which are not
transitions and are excluded from advantages and losses.

Truncation is handled by the collector: it adds ``gamma * V(final_obs)`` to the reward of
a truncated step and marks it ended, so GAE never bootstraps across an episode boundary.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class RolloutBuffer:
    """Fixed-length rollout of ``num_steps`` vector steps over ``num_envs`` sub-envs."""

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_dim: int | tuple[tuple[int, ...], Any],
        action_shape: tuple[int, ...],
        action_dtype: Any,
    ):
        self.num_steps, self.num_envs = int(num_steps), int(num_envs)
        shape = (self.num_steps, self.num_envs)
        # A flat float32 width, or (row shape, dtype) of the observation batches stored
        # (``ObsEncoder.shape``/``dtype``: uint8 images and structured composite rows).
        obs_shape: tuple[int, ...]
        if isinstance(obs_dim, int):
            obs_shape, obs_dtype = (int(obs_dim),), np.dtype(np.float32)
        else:
            obs_shape, obs_dtype = tuple(obs_dim[0]), np.dtype(obs_dim[1])
        self.obs = np.zeros((*shape, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((*shape, *action_shape), dtype=action_dtype)
        self.log_probs = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.ended = np.zeros(shape, dtype=np.float32)
        self.valid = np.zeros(shape, dtype=bool)
        self.advantages = np.zeros(shape, dtype=np.float32)
        self.returns = np.zeros(shape, dtype=np.float32)
        self.pos = 0

    def reset(self) -> None:
        self.pos = 0

    @property
    def full(self) -> bool:
        return self.pos == self.num_steps

    def add(
        self, obs: Any, action: Any, log_prob: Any, value: Any, reward: Any, ended: Any, valid: Any
    ) -> None:
        t = self.pos
        self.obs[t] = np.asarray(obs, dtype=self.obs.dtype).reshape(self.obs.shape[1:])
        self.actions[t] = np.asarray(action).reshape(self.actions.shape[1:])
        self.log_probs[t] = log_prob
        self.values[t] = value
        self.rewards[t] = reward
        self.ended[t] = ended
        self.valid[t] = valid
        self.pos += 1

    def compute_gae(self, last_value: np.ndarray, gamma: float, gae_lambda: float) -> None:
        """Generalised advantage estimation over the stored steps (and ``returns``).

        ``last_value`` = V(observation after the last stored step). Invalid steps get zero
        advantage and are never bootstrapped from (the step before them has ended).
        """
        last_gae = np.zeros(self.num_envs, dtype=np.float32)
        next_value = np.asarray(last_value, dtype=np.float32)
        for t in reversed(range(self.pos)):
            not_ended = 1.0 - self.ended[t]
            delta = self.rewards[t] + gamma * next_value * not_ended - self.values[t]
            last_gae = delta + gamma * gae_lambda * not_ended * last_gae
            last_gae = np.where(self.valid[t], last_gae, 0.0).astype(np.float32)
            self.advantages[t] = last_gae
            next_value = self.values[t]
        self.returns[: self.pos] = self.advantages[: self.pos] + self.values[: self.pos]

    def flat(self) -> dict[str, np.ndarray]:
        """Valid samples of the rollout, flattened over steps and sub-envs."""
        mask = self.valid[: self.pos].reshape(-1)
        n = self.pos * self.num_envs
        return {
            "obs": self.obs[: self.pos].reshape(n, *self.obs.shape[2:])[mask],
            "actions": self.actions[: self.pos].reshape(n, *self.actions.shape[2:])[mask],
            "log_probs": self.log_probs[: self.pos].reshape(n)[mask],
            "values": self.values[: self.pos].reshape(n)[mask],
            "advantages": self.advantages[: self.pos].reshape(n)[mask],
            "returns": self.returns[: self.pos].reshape(n)[mask],
        }
