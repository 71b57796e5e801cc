"""PettingZoo parallel environments, built and vectorised from a ``PzEnvSpec``.

Construction (manifest spec §3.2): with an ``entrypoint``, ``constructor(**config)``;
otherwise ``name`` is imported as a module and ``module.parallel_env(**config)`` is called.
``wrappers`` (same forms as for Gymnasium) and then ``extra_wrappers`` are applied in order.

Vectorisation: :class:`PettingZooVectorEnv` steps its sub-envs in this process (on a
two-core machine subprocesses cost more than cheap multi-agent envs such as MPE take to
step). Observations, rewards and flags are dicts keyed by agent id, each batched over the
sub-envs. It uses the same ``NEXT_STEP`` autoreset mode as the Gymnasium vector envs: the
step after a sub-env's episode ends (every agent terminated or truncated, or none left)
ignores the actions, resets that sub-env and returns its first observations with rewards 0
and both flags false. An agent absent from a sub-env mid-episode (it finished earlier) gets
a zero observation, reward 0 and ``terminated`` true; ``info[agent]["active"]`` (a bool
array) says which entries came from a live agent.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from agilerl.envs.entrypoint import resolve_entrypoint
from agilerl.envs.gym_env import AUTORESET_MODE
from agilerl.envs.wrappers import apply_wrappers, resolve_wrappers

__all__ = [
    "PettingZooVectorEnv",
    "make_pz_env_factory",
    "make_pz_single_env",
    "make_pz_vector_env",
]


def _get(spec: Any, field: str) -> Any:
    return getattr(spec, field, None)


def make_pz_env_factory(
    spec: Any, extra_wrappers: Sequence[Any] | None = None
) -> Callable[[], Any]:
    """A zero-argument callable building one PettingZoo parallel env from ``spec``."""
    path = _get(spec, "path")
    config = dict(_get(spec, "config") or {})
    wrappers = resolve_wrappers(_get(spec, "wrappers"), path)
    wrappers += resolve_wrappers(extra_wrappers, path)
    entrypoint = _get(spec, "entrypoint")
    if entrypoint:
        constructor: Callable[..., Any] = resolve_entrypoint(entrypoint, path)
    else:
        name = _get(spec, "name")
        if not name:
            raise ValueError("PettingZoo env spec needs a 'name' (module path) or an 'entrypoint'.")
        module = importlib.import_module(name)
        if not callable(getattr(module, "parallel_env", None)):
            raise AttributeError(f"Module '{name}' has no 'parallel_env' function.")
        constructor = module.parallel_env

    def factory() -> Any:
        return apply_wrappers(constructor(**config), wrappers)

    return factory


def make_pz_single_env(spec: Any, extra_wrappers: Sequence[Any] | None = None) -> Any:
    """One unvectorised PettingZoo parallel env."""
    return make_pz_env_factory(spec, extra_wrappers)()


def make_pz_vector_env(
    spec: Any, extra_wrappers: Sequence[Any] | None = None, seed: int | None = None
) -> PettingZooVectorEnv:
    """``num_envs`` copies of the spec's env in a :class:`PettingZooVectorEnv`.

    ``seed``: when given the env is reset once with it (sub-env ``i`` gets ``seed + i``)
    and the per-agent action spaces are seeded.
    """
    num_envs = int(_get(spec, "num_envs") or 0)
    if num_envs < 1:
        raise ValueError(f"Environment 'num_envs' must be >= 1, got {_get(spec, 'num_envs')}.")
    factory = make_pz_env_factory(spec, extra_wrappers)
    env = PettingZooVectorEnv([factory] * num_envs)
    if seed is not None:
        env.reset(seed=seed)
        for offset, agent in enumerate(env.agents):
            env.single_action_space(agent).seed(seed + offset)
            env.action_space(agent).seed(seed + offset)
    return env


class PettingZooVectorEnv:
    """Synchronous vector env over PettingZoo parallel envs (agent-keyed batched dicts)."""

    metadata: dict[str, Any] = {"autoreset_mode": AUTORESET_MODE}

    def __init__(self, env_fns: Sequence[Callable[[], Any]]):
        if not env_fns:
            raise ValueError("PettingZooVectorEnv needs at least one env")
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.metadata = {**getattr(first, "metadata", {}), "autoreset_mode": AUTORESET_MODE}
        self.agents: list[str] = list(first.possible_agents)
        self.possible_agents = self.agents
        self._obs_spaces = {a: first.observation_space(a) for a in self.agents}
        self._act_spaces = {a: first.action_space(a) for a in self.agents}
        self._batched_obs = {a: batch_space(s, self.num_envs) for a, s in self._obs_spaces.items()}
        self._batched_act = {a: batch_space(s, self.num_envs) for a, s in self._act_spaces.items()}
        # What an absent agent observes: a zero element of its space.
        self._zero_obs = {
            a: next(iter(iterate(batch_space(s, 1), create_empty_array(s, 1, np.zeros))))
            for a, s in self._obs_spaces.items()
        }
        self._needs_reset = np.zeros(self.num_envs, dtype=bool)

    # Spaces, named as in PettingZoo (per agent) with single_/batched variants as in Gymnasium.
    def single_observation_space(self, agent: str) -> spaces.Space:
        return self._obs_spaces[agent]

    def single_action_space(self, agent: str) -> spaces.Space:
        return self._act_spaces[agent]

    def observation_space(self, agent: str) -> spaces.Space:
        return self._batched_obs[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._batched_act[agent]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        results = []
        for i, env in enumerate(self.envs):
            sub_seed = None if seed is None else seed + i
            results.append(env.reset(seed=sub_seed, options=options))
        self._needs_reset[:] = False
        obs = [r[0] for r in results]
        infos = [r[1] for r in results]
        return self._batch_obs(obs), self._batch_infos(infos, obs)

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, Any],
        dict[str, np.ndarray],
        dict[str, np.ndarray],
        dict[str, np.ndarray],
        dict[str, Any],
    ]:
        n = self.num_envs
        rewards = {a: np.zeros(n, dtype=np.float32) for a in self.agents}
        terminated = {a: np.zeros(n, dtype=bool) for a in self.agents}
        truncated = {a: np.zeros(n, dtype=bool) for a in self.agents}
        obs_list: list[dict[str, Any]] = []
        info_list: list[dict[str, Any]] = []
        for i, env in enumerate(self.envs):
            if self._needs_reset[i]:
                obs_i, info_i = env.reset()
                self._needs_reset[i] = False
                obs_list.append(obs_i)
                info_list.append(info_i)
                continue
            live = list(env.agents)
            step_actions = {a: _index(actions[a], i) for a in live}
            obs_i, rew_i, term_i, trunc_i, info_i = env.step(step_actions)
            for agent in self.agents:
                if agent in live:
                    rewards[agent][i] = float(rew_i.get(agent, 0.0))
                    terminated[agent][i] = bool(term_i.get(agent, False))
                    truncated[agent][i] = bool(trunc_i.get(agent, False))
                else:
                    terminated[agent][i] = True
            finished = not env.agents or all(
                terminated[a][i] or truncated[a][i] for a in self.agents
            )
            self._needs_reset[i] = finished
            obs_list.append(obs_i)
            info_list.append(info_i)
        return (
            self._batch_obs(obs_list),
            rewards,
            terminated,
            truncated,
            self._batch_infos(info_list, obs_list),
        )

    def _batch_obs(self, obs_list: list[dict[str, Any]]) -> dict[str, Any]:
        batched: dict[str, Any] = {}
        for agent in self.agents:
            space = self._obs_spaces[agent]
            zero = self._zero_obs[agent]
            items = [obs.get(agent, zero) for obs in obs_list]
            out: Any = create_empty_array(space, n=self.num_envs, fn=np.zeros)
            batched[agent] = concatenate(space, items, out)
        return batched

    def _batch_infos(
        self, info_list: list[dict[str, Any]], obs_list: list[dict[str, Any]]
    ) -> dict[str, Any]:
        infos: dict[str, Any] = {}
        for agent in self.agents:
            active = np.array([agent in obs for obs in obs_list], dtype=bool)
            infos[agent] = {
                "active": active,
                "env_infos": [info.get(agent, {}) for info in info_list],
            }
        return infos

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _index(batch: Any, i: int) -> Any:
    if isinstance(batch, dict):
        return {key: _index(value, i) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_index(value, i) for value in batch)
    return batch[i]
