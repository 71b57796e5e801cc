"""Exploration noise for deterministic policies (DDPG, TD3), one stream per sub-env.

Noise is added to the policy's *normalised* action (every component in [-1, 1], see
``agilerl.algorithms.ddpg``), so ``expl_noise`` is a fraction of the half-range of each
action dimension whatever the environment's bounds.

* Gaussian: ``mean_noise + expl_noise * N(0, 1)``, independent at every step.
* Ornstein-Uhlenbeck: ``x <- x + theta * (mean_noise - x) * dt + expl_noise * sqrt(dt) * N(0, 1)``,
  temporally correlated; the state of a sub-env restarts from zero when its episode ends.

The state is a plain array (part of the agent's checkpoint), and the draws come from the
agent's numpy generator, so exploration is reproducible and resumes exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class NoiseSettings:
    """The noise hyperparameters (read from the agent at every draw: mutation may change them)."""

    ornstein_uhlenbeck: bool
    scale: float
    mean: float
    theta: float
    dt: float


class ActionNoise:
    """Noise of shape ``(num_envs, action_dim)``; ``num_envs`` follows the batch asked for."""

    def __init__(self, action_dim: int) -> None:
        self.action_dim = int(action_dim)
        self.state: np.ndarray | None = None  # OU state, one row per sub-env

    def sample(
        self, num_envs: int, rng: np.random.Generator, settings: NoiseSettings
    ) -> np.ndarray:
        """The next noise for ``num_envs`` sub-envs (advances the OU state)."""
        gauss = rng.standard_normal((num_envs, self.action_dim))
        if not settings.ornstein_uhlenbeck:
            return settings.mean + settings.scale * gauss
        if self.state is None or self.state.shape[0] != num_envs:
            self.state = np.zeros((num_envs, self.action_dim))
        self.state = (
            self.state
            + settings.theta * (settings.mean - self.state) * settings.dt
            + settings.scale * np.sqrt(settings.dt) * gauss
        )
        return self.state.copy()

    def reset(self, ended: npt.ArrayLike | None = None) -> None:
        """Restart the correlated state of the sub-envs in the bool mask ``ended`` (None: all)."""
        if self.state is None:
            return
        if ended is None:
            self.state[:] = 0.0
        else:
            self.state[np.asarray(ended, dtype=bool)] = 0.0
