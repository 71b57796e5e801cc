"""Probe environments: tiny MDPs with known answers, for testing that a learner learns.

Each isolates one ability (after Andy Jones' "debugging RL" probes):

============================  ==========================================  ===================
env                           what it checks                              analytic answer
============================  ==========================================  ===================
``ConstantRewardEnv``         value learning at all                       V = Q = 1
``ObsDependentRewardEnv``     values depend on the observation            V(0) = -1, V(1) = 1
``DiscountedRewardEnv``       bootstrapping through time, discounting     V(0) = gamma, V(1) = 1
``FixedObsPolicyEnv``         action-dependent reward (policy learning)   Q = [-1, 1], pi -> 1
``ObsPolicyEnv``              policy depends on the observation           pi(s) = s
``ConstantRewardContEnv``     value learning, continuous actions          V = 1
``FixedObsPolicyContEnv``     continuous policy improvement               a -> 1 (reward -(a-1)^2)
``ObsPolicyContEnv``          observation-dependent continuous policy     a -> s (reward -(a-s)^2)
``BoundedObsPolicyContEnv``   action bounds [-2, 2], interior optimum     a -> 2s - 1 (Q* = 0)
============================  ==========================================  ===================

Observations are ``Box(0, 1, (1,))``; every episode is one step except the discounted one
(two). ``make_probe_vector_env`` builds a vector env of any of them.
"""

from __future__ import annotations

from typing import TypeAlias

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

ProbeAction: TypeAlias = int | np.integer | np.ndarray
"""A discrete probe's action (an index) or a continuous one's (a 1-element array)."""
ProbeStep: TypeAlias = tuple[np.ndarray, float, bool, bool, dict[str, object]]
"""Gymnasium's ``(obs, reward, terminated, truncated, info)``."""


class _ProbeEnv(gym.Env):
    """One-step episode on an observation in {0, 1}; subclasses define reward and obs."""

    metadata: dict[str, object] = {"render_modes": []}
    random_obs = False

    def __init__(self, continuous: bool = False, num_actions: int = 2) -> None:
        self.observation_space = spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
        if continuous:
            self.action_space = spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
        else:
            self.action_space = spaces.Discrete(num_actions)
        self._obs = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, object] | None = None
              ) -> tuple[np.ndarray, dict[str, object]]:
        super().reset(seed=seed)
        self._obs = float(self.np_random.integers(0, 2)) if self.random_obs else 0.0
        return self._observation(), {}

    def _observation(self) -> np.ndarray:
        return np.array([self._obs], dtype=np.float32)

    def reward(self, action: ProbeAction) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def step(self, action: ProbeAction) -> ProbeStep:
        return self._observation(), float(self.reward(action)), True, False, {}


class ConstantRewardEnv(_ProbeEnv):
    def __init__(self) -> None:
        super().__init__(num_actions=1)

    def reward(self, action: ProbeAction) -> float:
        return 1.0


class ObsDependentRewardEnv(_ProbeEnv):
    random_obs = True

    def __init__(self) -> None:
        super().__init__(num_actions=1)

    def reward(self, action: ProbeAction) -> float:
        return 1.0 if self._obs > 0.5 else -1.0


class DiscountedRewardEnv(_ProbeEnv):
    """Two steps: obs 0 (reward 0), then obs 1 (reward 1, episode ends)."""

    def __init__(self) -> None:
        super().__init__(num_actions=1)

    def step(self, action: ProbeAction) -> ProbeStep:
        if self._obs < 0.5:
            self._obs = 1.0
            return self._observation(), 0.0, False, False, {}
        return self._observation(), 1.0, True, False, {}


class FixedObsPolicyEnv(_ProbeEnv):
    def reward(self, action: ProbeAction) -> float:
        return 1.0 if int(action) == 1 else -1.0


class ObsPolicyEnv(_ProbeEnv):
    random_obs = True

    def reward(self, action: ProbeAction) -> float:
        return 1.0 if int(action) == int(self._obs) else -1.0


class ConstantRewardContEnv(_ProbeEnv):
    def __init__(self) -> None:
        super().__init__(continuous=True)

    def reward(self, action: ProbeAction) -> float:
        return 1.0


class FixedObsPolicyContEnv(_ProbeEnv):
    def __init__(self) -> None:
        super().__init__(continuous=True)

    def reward(self, action: ProbeAction) -> float:
        return -float((np.asarray(action).reshape(-1)[0] - 1.0) ** 2)


class ObsPolicyContEnv(_ProbeEnv):
    random_obs = True

    def __init__(self) -> None:
        super().__init__(continuous=True)

    def reward(self, action: ProbeAction) -> float:
        return -float((np.asarray(action).reshape(-1)[0] - self._obs) ** 2)


class BoundedObsPolicyContEnv(_ProbeEnv):
    """Actions in [-2, 2] whose best value, ``2s - 1`` (-1 or 1), lies inside the bounds:
    a policy that ignores the action scaling or saturates at a bound misses it."""

    random_obs = True

    def __init__(self) -> None:
        super().__init__(continuous=True)
        self.action_space = spaces.Box(-2.0, 2.0, (1,), dtype=np.float32)

    def reward(self, action: ProbeAction) -> float:
        return -float((np.asarray(action).reshape(-1)[0] - (2.0 * self._obs - 1.0)) ** 2)


PROBE_ENVS: dict[str, type[_ProbeEnv]] = {
    cls.__name__: cls
    for cls in (
        ConstantRewardEnv,
        ObsDependentRewardEnv,
        DiscountedRewardEnv,
        FixedObsPolicyEnv,
        ObsPolicyEnv,
        ConstantRewardContEnv,
        FixedObsPolicyContEnv,
        ObsPolicyContEnv,
        BoundedObsPolicyContEnv,
    )
}


def make_probe_vector_env(
    env: str | type[_ProbeEnv],
    num_envs: int = 4,
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
) -> SyncVectorEnv:
    """A ``SyncVectorEnv`` of ``num_envs`` copies of a probe env (class or class name)."""
    cls = PROBE_ENVS[env] if isinstance(env, str) else env
    return SyncVectorEnv([cls for _ in range(num_envs)], autoreset_mode=autoreset_mode)
