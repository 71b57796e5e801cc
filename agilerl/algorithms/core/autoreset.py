"""Gymnasium >= 1.0 vector-env autoreset, seen from a learner.

In ``NEXT_STEP`` mode (the default, and the only mode of Gymnasium's native classic-control
vector envs) a sub-env that finished at step ``t`` returns its reset observation at step
``t + 1``, ignoring the action, with reward 0. That step is not a transition and must not be
learned from; ``Autoreset.step`` returns a mask of the sub-envs whose step was real. The
observation returned on the finishing step is the true final observation, so
``next_obs`` is right as returned.

In ``SAME_STEP`` mode the finishing step already returns the reset observation and the
final one is in ``info["final_obs"]``; ``Autoreset.step`` substitutes it into
``next_obs`` so callers see the same thing in both modes: ``next_obs`` is always the
observation that followed the action, ``obs`` for the next action is what the env returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from agilerl.core.value_types import Observation


class VectorEnv(Protocol):
    """What the loops and evaluation use of a Gymnasium >= 1.0 vector env (its
    ``metadata["autoreset_mode"]`` is read when it has one)."""

    @property
    def num_envs(self) -> int: ...

    def reset(self, *, seed: int | None = None) -> tuple[Observation, Mapping[str, object]]:
        """``(obs, info)``."""
        ...

    def step(self, actions: np.ndarray, /) -> tuple[
            Observation, npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, Mapping[str, object]]:
        """``(obs, reward, terminated, truncated, info)``, one row per sub-env."""
        ...


def autoreset_mode(env: object) -> AutoresetMode:
    mode = getattr(env, "metadata", {}).get("autoreset_mode", AutoresetMode.NEXT_STEP)
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)


class Autoreset:
    """Wraps stepping a vector env so both autoreset modes look alike to a learner."""

    def __init__(self, env: VectorEnv):
        self.env = env
        self.mode = autoreset_mode(env)
        if self.mode == AutoresetMode.DISABLED:
            raise ValueError("vector envs with autoreset disabled are not supported by the loops")
        self.num_envs = int(env.num_envs)
        self._resetting = np.zeros(self.num_envs, dtype=bool)

    def reset(self, seed: int | None = None) -> Observation:
        obs, _ = self.env.reset(seed=seed)
        self._resetting[:] = False
        return obs

    def step(
        self, action: np.ndarray
    ) -> tuple[Observation, Observation, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
               Mapping[str, object]]:
        """Step; returns ``(obs, next_obs, reward, terminated, truncated, valid, info)``.

        ``valid[i]`` is False when sub-env ``i`` only reset (NEXT_STEP); its reward and
        flags are then meaningless. ``next_obs`` equals ``obs`` except in SAME_STEP mode on
        finished sub-envs, where it holds the final observation.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward = np.asarray(reward, dtype=np.float32)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        done = terminated | truncated
        next_obs = obs
        if self.mode == AutoresetMode.NEXT_STEP:
            valid = ~self._resetting
            self._resetting = done & valid
        else:
            valid = np.ones(self.num_envs, dtype=bool)
            if done.any() and "final_obs" in info:
                next_obs = _with_final_obs(obs, info["final_obs"], done)
        return obs, next_obs, reward, terminated, truncated, valid, info


def _with_final_obs(obs: Any, final_obs: Any, done: np.ndarray) -> Any:
    """``obs`` with the rows of finished sub-envs replaced by their final observation
    (composite observations part by part)."""
    if isinstance(obs, dict):
        return {k: _with_final_obs(v, _parts(final_obs, k, done), done) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(
            _with_final_obs(v, _parts(final_obs, k, done), done) for k, v in enumerate(obs)
        )
    next_obs = np.array(obs, copy=True)
    for i in np.flatnonzero(done):
        next_obs[i] = final_obs[i]
    return next_obs


def _parts(final_obs: Any, key: str | int, done: np.ndarray) -> list[Any]:
    """Per-sub-env final observations -> that part of each (None where not finished)."""
    return [final_obs[i][key] if done[i] else None for i in range(len(done))]
