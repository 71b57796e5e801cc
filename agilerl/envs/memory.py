"""Memory tasks: a probe that repeats the first observation, and CartPole without velocities.

``RepeatFirstObservationEnv`` checks that a learner can remember. An episode lasts
``delay + 1`` steps. The first observation shows a cue (one of ``num_cues``, one-hot);
the next ``delay - 1`` observations are blank; the last one raises only a "query" flag.
The action taken at the query step is rewarded +1 if it names the cue, -1 otherwise;
every other step gives 0 whatever the action.

Observation: ``Box(0, 1, (num_cues + 1,))`` = cue one-hot (first step only), query flag.
A feed-forward policy sees the same blank query observation whatever the cue, so its best
expected return is ``(2 / num_cues) - 1`` (0 for two cues); a policy that remembers the cue
earns 1. Shipped as ``RepeatFirstObservation-v0`` (:mod:`agilerl.env_registry`).

``CartPoleNoVelocity`` is Gymnasium's ``CartPole-v1`` (the same dynamics, rewards and
500-step limit) observed through a wrapper that keeps the cart position and pole angle and
drops both velocities. One observation then says where the pole is but not where it is
going: a policy must infer the velocities from the observations before, so a feed-forward
policy does poorly and a recurrent one can solve it (RL Zoo's ``CartPoleNoVel-v1``).
Shipped as ``CartPoleNoVel-v1``.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv


class RepeatFirstObservationEnv(gym.Env):
    """Remember the cue shown at the first step; name it at the last step."""

    metadata: dict[str, object] = {"render_modes": []}

    def __init__(self, delay: int = 2, num_cues: int = 2) -> None:
        if delay < 1 or num_cues < 2:
            raise ValueError("RepeatFirstObservation needs delay >= 1 and num_cues >= 2")
        self.delay, self.num_cues = int(delay), int(num_cues)
        self.observation_space = spaces.Box(0.0, 1.0, (self.num_cues + 1,), dtype=np.float32)
        self.action_space = spaces.Discrete(self.num_cues)
        self._cue = 0
        self._t = 0

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.num_cues + 1, dtype=np.float32)
        if self._t == 0:
            obs[self._cue] = 1.0
        if self._t == self.delay:
            obs[-1] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, object] | None = None
              ) -> tuple[np.ndarray, dict[str, object]]:
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(self.num_cues))
        self._t = 0
        return self._observation(), {}

    def step(self, action: int | np.integer
             ) -> tuple[np.ndarray, float, bool, bool, dict[str, object]]:
        if self._t < self.delay:
            self._t += 1
            return self._observation(), 0.0, False, False, {}
        reward = 1.0 if int(action) == self._cue else -1.0
        return self._observation(), reward, True, False, {}


class CartPoleNoVelocity(gym.ObservationWrapper):
    """``CartPole-v1`` observing ``[cart position, pole angle]`` only."""

    #: Indices of CartPole's observation kept: cart position, pole angle.
    KEPT = (0, 2)

    def __init__(self, **kwargs: object) -> None:
        make: Callable[..., gym.Env] = gym.make  # checks CartPole's keywords itself
        super().__init__(make("CartPole-v1", **kwargs))
        full = self.env.observation_space
        assert isinstance(full, spaces.Box)
        keep = list(self.KEPT)
        self.observation_space = spaces.Box(full.low[keep], full.high[keep], dtype=full.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation)[list(self.KEPT)]


def make_memory_vector_env(
    num_envs: int = 4,
    delay: int = 2,
    num_cues: int = 2,
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
) -> SyncVectorEnv:
    """A ``SyncVectorEnv`` of ``num_envs`` memory probes."""
    return SyncVectorEnv(
        [lambda: RepeatFirstObservationEnv(delay, num_cues) for _ in range(num_envs)],
        autoreset_mode=autoreset_mode,
    )
