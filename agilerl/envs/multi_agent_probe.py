"""Multi-agent probe environments (PettingZoo parallel API) that a working learner solves
in seconds, with a known random-policy return.

``parallel_env(**config)`` builds :class:`TargetProbeEnv`, so a manifest names it like any
PettingZoo module: ``environment: {name: agilerl.envs.multi_agent_probe}``.

Each step every agent observes a one-hot target of its own and is rewarded for hitting it:

* ``seeker_0``, ``seeker_1`` (one homogeneous group): observation one-hot of a target in
  {0, 1} (Box(2)), action Discrete(2), reward 1 when the action equals the target;
* ``pointer_0`` (its own group, present when ``continuous``): observation one-hot of a
  target in {0, 1} (Box(2)), action Box(-1, 1, (1,)), reward ``1 - |a - v|`` with
  ``v = -0.5`` or ``+0.5`` for target 0 or 1.

Episodes last ``episode_length`` steps (truncation). With ``early_exit`` seeker_1 leaves
(terminates) halfway, as PettingZoo agents may. With ``action_masks`` the seekers observe
``{"observation", "action_mask"}`` (the mask allows only the target and one random other
action of ``Discrete(3)``), as in ``pettingzoo.classic``; an illegal action is rewarded -1.

Per step, a uniform random policy earns 0.5 per seeker (1/3 with masks ignored) and 0.375
for the pointer; a perfect one earns 1 each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, TypedDict, Unpack

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from agilerl.core.value_types import Space

AgentObservation: TypeAlias = np.ndarray | dict[str, np.ndarray]
"""A one-hot target, or with ``action_masks`` a seeker's ``{"observation", "action_mask"}``."""
AgentAction: TypeAlias = int | np.integer | np.ndarray
"""A seeker's choice (an index) or the pointer's 1-element array."""

SEEKERS = ("seeker_0", "seeker_1")
POINTER = "pointer_0"


class TargetProbeEnv(ParallelEnv):
    """See the module docstring."""

    metadata = {"name": "target_probe_v0", "render_modes": []}

    def __init__(
        self,
        episode_length: int = 4,
        continuous: bool = True,
        early_exit: bool = False,
        action_masks: bool = False,
    ) -> None:
        self.episode_length = int(episode_length)
        self.early_exit = bool(early_exit)
        self.masked = bool(action_masks)
        self.possible_agents = [*SEEKERS, *([POINTER] if continuous else [])]
        self.agents: list[str] = []
        target = spaces.Box(0.0, 1.0, (2,), np.float32)
        seeker_obs: Space = target
        self._n_seeker_actions = 3 if self.masked else 2
        if self.masked:
            seeker_obs = spaces.Dict({
                "observation": target,
                "action_mask": spaces.Box(0, 1, (3,), np.int8),
            })
        self._obs_spaces = {a: seeker_obs for a in SEEKERS}
        self._act_spaces: dict[str, Space] = {
            a: spaces.Discrete(self._n_seeker_actions) for a in SEEKERS
        }
        if continuous:
            self._obs_spaces[POINTER] = target
            self._act_spaces[POINTER] = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._rng = np.random.default_rng()
        self._targets: dict[str, int] = {}
        self._masks: dict[str, np.ndarray] = {}
        self._t = 0

    def observation_space(self, agent: str) -> Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> Space:
        return self._act_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, AgentObservation], dict[str, dict[str, object]]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._t = 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions: Mapping[str, AgentAction]) -> tuple[
        dict[str, AgentObservation], dict[str, float], dict[str, bool], dict[str, bool],
        dict[str, dict[str, object]],
    ]:
        rewards = {a: self._reward(a, actions[a]) for a in self.agents}
        self._t += 1
        truncated = {a: self._t >= self.episode_length for a in self.agents}
        terminated = {a: False for a in self.agents}
        if self.early_exit and "seeker_1" in self.agents and self._t >= self.episode_length // 2:
            terminated["seeker_1"] = True
        infos: dict[str, dict[str, object]] = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return self._observe(), rewards, terminated, truncated, infos

    def _reward(self, agent: str, action: AgentAction) -> float:
        target = self._targets[agent]
        if agent == POINTER:
            value = -0.5 if target == 0 else 0.5
            return float(1.0 - abs(float(np.asarray(action).reshape(-1)[0]) - value))
        act = int(action)
        if self.masked and not self._masks[agent][act]:
            return -1.0
        return 1.0 if act == target else 0.0

    def _observe(self) -> dict[str, AgentObservation]:
        obs: dict[str, AgentObservation] = {}
        for agent in self.agents:
            target = int(self._rng.integers(2))
            self._targets[agent] = target
            one_hot = np.eye(2, dtype=np.float32)[target]
            if self.masked and agent in SEEKERS:
                mask = np.zeros(3, dtype=np.int8)
                mask[target] = 1
                mask[int(self._rng.choice([i for i in range(3) if i != target]))] = 1
                self._masks[agent] = mask
                obs[agent] = {"observation": one_hot, "action_mask": mask}
            else:
                obs[agent] = one_hot
        return obs

    def close(self) -> None:
        return None


class ProbeConfig(TypedDict, total=False):
    """The keyword arguments of :class:`TargetProbeEnv` (``environment.config``)."""

    episode_length: int
    continuous: bool
    early_exit: bool
    action_masks: bool


def parallel_env(**config: Unpack[ProbeConfig]) -> TargetProbeEnv:
    """The probe env (module-path construction, as PettingZoo environments are built)."""
    return TargetProbeEnv(**config)
