"""PettingZoo parallel environments, built and vectorised from a ``PzEnvSpec``.

Construction (manifest spec §3.2): with an ``entrypoint``, ``constructor(**config)``;
otherwise ``name`` is imported as a module and ``module.parallel_env(**config)`` is called.
``wrappers`` (same forms as for Gymnasium) and then ``extra_wrappers`` are applied in order.

Names: ``mpe2.*`` (the MPE package), the old ``pettingzoo.mpe.*`` paths (MPE left
PettingZoo for ``mpe2``: mapped to ``mpe2.*`` with a one-line notice),
``pettingzoo.butterfly.*`` (extra ``[butterfly]``), ``pettingzoo.classic.*`` with a
``parallel_env`` (simultaneous moves, e.g. ``rps_v2``; turn-based classic games are AEC
only and are refused with a message saying so), or any module with a ``parallel_env``.
A missing optional package is reported with the extra that installs it.

Vectorisation: :class:`PettingZooVectorEnv` steps its sub-envs in this process (``sync``,
the default: on a two-core machine subprocesses cost more than cheap multi-agent envs
such as MPE take to step); with ``sync: false`` :class:`AsyncPettingZooVectorEnv` runs
them in worker processes, each stepping a contiguous chunk of sub-envs with a
:class:`PettingZooVectorEnv` (the machinery of
:class:`~agilerl.envs.chunked_async.ChunkedAsyncVectorEnv`); sub-env ``i`` is seeded
``seed + i`` in both, so both give the same trajectories.

Observations, rewards and flags are dicts keyed by agent id, each batched over the
sub-envs. Both use the same ``NEXT_STEP`` autoreset mode as the Gymnasium vector envs: the
step after a sub-env's episode ends (every agent terminated or truncated, or none left)
ignores the actions, resets that sub-env and returns its first observations with rewards 0
and both flags false. An agent absent from a sub-env (it finished earlier, or has not
joined yet) gets a zero observation, reward 0 and ``terminated`` true;
``info[agent]["active"]`` (a bool array) says which entries came from a live agent.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import multiprocessing.util as mp_util
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from agilerl.core.environment_facts import moved_module
from agilerl.core.value_types import Observation, Space
from agilerl.envs.chunked_async import (
    ChunkedAsyncVectorEnv,
    NestedArrays,
    _concat,
    _kill_workers,
    _split,
    default_num_processes,
)
from agilerl.envs.entrypoint import resolve_entrypoint
from agilerl.envs.gym_env import AUTORESET_MODE, spec_field
from agilerl.envs.parallel_step import fast_parallel_step
from agilerl.envs.wrappers import apply_wrappers, resolve_wrappers

if TYPE_CHECKING:  # pragma: no cover
    from pettingzoo import ParallelEnv

__all__ = [
    "AsyncPettingZooVectorEnv",
    "PettingZooVectorEnv",
    "make_pz_env_factory",
    "make_pz_single_env",
    "make_pz_vector_env",
    "resolve_pz_module",
]

#: Optional packages of PettingZoo env families -> the agilerl extra that installs them.
_PZ_EXTRAS = {"mpe2": "mpe", "pygame": "butterfly", "pymunk": "butterfly"}
_NOTICED: set[str] = set()


class AgentInfo(TypedDict):
    """One agent's info from a vector env: whether each sub-env's entry came from a live
    agent, and each sub-env's own info for the agent."""

    active: np.ndarray
    env_infos: list[dict[str, object]]


def resolve_pz_module(name: str) -> ModuleType:
    """Import the module of a PettingZoo env name (see the module docstring) and return it.

    An old ``pettingzoo.mpe.X`` path is mapped to ``mpe2.X`` (one notice per process); a
    missing optional package raises ``ImportError`` naming the extra to install; a
    module without ``parallel_env`` raises ``AttributeError`` saying why.
    """
    moved = moved_module(name)
    if moved is not None:
        if name not in _NOTICED:
            _NOTICED.add(name)
            warnings.warn(f"environment {name!r}: MPE moved out of PettingZoo into the mpe2 "
                          f"package; using {moved!r}", UserWarning, stacklevel=3)
        name = moved
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        extra = _PZ_EXTRAS.get(missing)
        if extra is None or name.partition(".")[0] == missing and missing != "mpe2":
            raise
        raise ImportError(
            f"environment {name!r} needs the Python package {missing!r}, which is not "
            f"installed. Install it with: pip install 'agilerl[{extra}]'"
        ) from None
    if not callable(getattr(module, "parallel_env", None)):
        if callable(getattr(module, "env", None)):
            raise AttributeError(
                f"environment {name!r} is a turn-based (AEC) PettingZoo environment with no "
                "parallel_env: multi-agent algorithms here need the parallel API "
                "(simultaneous moves), e.g. pettingzoo.classic.rps_v2 or MPE")
        raise AttributeError(f"Module {name!r} has no 'parallel_env' function.")
    return module


def make_pz_env_factory(
    spec: object, extra_wrappers: Sequence[object] | None = None
) -> Callable[[], ParallelEnv]:
    """A zero-argument callable building one PettingZoo parallel env from ``spec``."""
    path = spec_field(spec, "path")
    config = dict(spec_field(spec, "config") or {})
    wrappers = resolve_wrappers(spec_field(spec, "wrappers"), path)
    wrappers += resolve_wrappers(extra_wrappers, path)
    entrypoint = spec_field(spec, "entrypoint")
    if entrypoint:
        constructor: Callable[..., ParallelEnv] = resolve_entrypoint(entrypoint, path)
    else:
        name = spec_field(spec, "name")
        if not name:
            raise ValueError("PettingZoo env spec needs a 'name' (module path) or an 'entrypoint'.")
        constructor = resolve_pz_module(name).parallel_env

    def factory() -> ParallelEnv:
        return apply_wrappers(constructor(**config), wrappers)

    return factory


def make_pz_single_env(spec: object,
                       extra_wrappers: Sequence[object] | None = None) -> ParallelEnv:
    """One unvectorised PettingZoo parallel env."""
    return make_pz_env_factory(spec, extra_wrappers)()


def make_pz_vector_env(
    spec: object, extra_wrappers: Sequence[object] | None = None, seed: int | None = None
) -> PettingZooVectorEnv | AsyncPettingZooVectorEnv:
    """``num_envs`` copies of the spec's env: a :class:`PettingZooVectorEnv`, or with
    ``sync: false`` (and more than one sub-env) an :class:`AsyncPettingZooVectorEnv`.

    ``seed``: when given the env is reset once with it (sub-env ``i`` gets ``seed + i``)
    and the per-agent action spaces are seeded.
    """
    num_envs = int(spec_field(spec, "num_envs") or 0)
    if num_envs < 1:
        raise ValueError(f"Environment 'num_envs' must be >= 1, got {spec_field(spec, 'num_envs')}.")
    factory = make_pz_env_factory(spec, extra_wrappers)
    sync = spec_field(spec, "sync")
    env: PettingZooVectorEnv | AsyncPettingZooVectorEnv
    if sync is False and num_envs > 1:
        env = AsyncPettingZooVectorEnv([factory] * num_envs,
                                       name=str(spec_field(spec, "name") or entrypoint_label(spec)))
    else:
        env = PettingZooVectorEnv([factory] * num_envs)
    if seed is not None:
        env.reset(seed=seed)
        for offset, agent in enumerate(env.possible_agents):
            env.single_action_space(agent).seed(seed + offset)
            env.action_space(agent).seed(seed + offset)
    return env


def entrypoint_label(spec: object) -> str:
    return str(spec_field(spec, "entrypoint") or "PettingZoo env")


class _AgentSpaces:
    """Per-agent spaces, named as in PettingZoo (per agent) with single_/batched variants
    as in Gymnasium; shared by the sync and async vector envs."""

    num_envs: int
    agents: list[str]
    possible_agents: list[str]

    def _describe(self, first: ParallelEnv) -> None:
        self.agents = list(first.possible_agents)
        self.possible_agents = self.agents
        self._obs_spaces = {a: first.observation_space(a) for a in self.agents}
        self._act_spaces = {a: first.action_space(a) for a in self.agents}
        self._batched_obs = {a: batch_space(s, self.num_envs) for a, s in self._obs_spaces.items()}
        self._batched_act = {a: batch_space(s, self.num_envs) for a, s in self._act_spaces.items()}

    def single_observation_space(self, agent: str) -> Space:
        return self._obs_spaces[agent]

    def single_action_space(self, agent: str) -> Space:
        return self._act_spaces[agent]

    def observation_space(self, agent: str) -> Space:
        return self._batched_obs[agent]

    def action_space(self, agent: str) -> Space:
        return self._batched_act[agent]


class PettingZooVectorEnv(_AgentSpaces):
    """Synchronous vector env over PettingZoo parallel envs (agent-keyed batched dicts)."""

    metadata: dict[str, object] = {"autoreset_mode": AUTORESET_MODE}

    def __init__(self, env_fns: Sequence[Callable[[], ParallelEnv]]):
        if not env_fns:
            raise ValueError("PettingZooVectorEnv needs at least one env")
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        self._steps = [fast_parallel_step(env) or env.step for env in self.envs]
        first = self.envs[0]
        self.metadata = {**getattr(first, "metadata", {}), "autoreset_mode": AUTORESET_MODE}
        self._describe(first)
        # What an absent agent observes: a zero element of its space.
        self._zero_obs = {
            a: next(iter(iterate(batch_space(s, 1), create_empty_array(s, 1, np.zeros))))
            for a, s in self._obs_spaces.items()
        }
        self._needs_reset = np.zeros(self.num_envs, dtype=bool)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, object] | None = None,
    ) -> tuple[dict[str, Observation], dict[str, AgentInfo]]:
        """Reset every sub-env: sub-env ``i`` with ``seed + i`` (or ``seed[i]``)."""
        seeds = _seeds(seed, self.num_envs)
        results = [env.reset(seed=s, options=options) for env, s in zip(self.envs, seeds,
                                                                       strict=True)]
        self._needs_reset[:] = False
        obs = [r[0] for r in results]
        infos = [r[1] for r in results]
        return self._batch_obs(obs), self._batch_infos(infos, obs)

    def step(
        self, actions: Mapping[str, NestedArrays]
    ) -> tuple[
        dict[str, Observation],
        dict[str, np.ndarray],
        dict[str, np.ndarray],
        dict[str, np.ndarray],
        dict[str, AgentInfo],
    ]:
        n = self.num_envs
        rewards = {a: np.zeros(n, dtype=np.float32) for a in self.agents}
        terminated = {a: np.zeros(n, dtype=bool) for a in self.agents}
        truncated = {a: np.zeros(n, dtype=bool) for a in self.agents}
        obs_list: list[dict[str, object]] = []
        info_list: list[dict[str, dict[str, object]]] = []
        for i, env in enumerate(self.envs):
            if self._needs_reset[i]:
                obs_i, info_i = env.reset()
                self._needs_reset[i] = False
                obs_list.append(obs_i)
                info_list.append(info_i)
                continue
            live = list(env.agents)
            step_actions = {a: _index(actions[a], i) for a in live}
            obs_i, rew_i, term_i, trunc_i, info_i = self._steps[i](step_actions)
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

    def _batch_obs(self, obs_list: list[dict[str, object]]) -> dict[str, Observation]:
        batched: dict[str, Observation] = {}
        for agent in self.agents:
            space = self._obs_spaces[agent]
            zero = self._zero_obs[agent]
            items = [obs.get(agent, zero) for obs in obs_list]
            out = create_empty_array(space, n=self.num_envs, fn=np.zeros)
            assert out is not None  # (gymnasium's annotation; every space gives an array)
            batched[agent] = concatenate(space, items, out)
        return batched

    def _batch_infos(
        self, info_list: list[dict[str, dict[str, object]]], obs_list: list[dict[str, object]]
    ) -> dict[str, AgentInfo]:
        infos: dict[str, AgentInfo] = {}
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


def _seeds(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
    if seed is None or isinstance(seed, (int, np.integer)):
        return [None if seed is None else int(seed) + i for i in range(num_envs)]
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"expected {num_envs} seeds, got {len(seeds)}")
    return seeds


def _index(batch: NestedArrays, i: int) -> object:
    if isinstance(batch, dict):
        return {key: _index(value, i) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_index(value, i) for value in batch)
    return batch[i]


def _merge_agent_infos(parts: Sequence[dict[str, AgentInfo]]) -> dict[str, AgentInfo]:
    """Per-chunk ``{agent: {"active", "env_infos"}}`` -> one over every sub-env."""
    return {
        agent: {
            "active": np.concatenate([p[agent]["active"] for p in parts]),
            "env_infos": [info for p in parts for info in p[agent]["env_infos"]],
        }
        for agent in parts[0]
    }


class AsyncPettingZooVectorEnv(_AgentSpaces, ChunkedAsyncVectorEnv):  # type: ignore[misc]
    """PettingZoo vector env over worker processes, each stepping a chunk of sub-envs with a
    :class:`PettingZooVectorEnv` (same API, seeding and autoreset)."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], ParallelEnv]],
        num_processes: int | None = None,
        context: str | None = None,
        name: str | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError("AsyncPettingZooVectorEnv needs at least one env")
        self.num_envs = len(env_fns)
        workers = max(1, min(num_processes or default_num_processes(self.num_envs), self.num_envs))
        bounds = np.linspace(0, self.num_envs, workers + 1).round().astype(int)
        self._slices = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        dummy = env_fns[0]()
        self.name = name or type(dummy).__name__
        self.metadata = {**getattr(dummy, "metadata", {}), "autoreset_mode": AUTORESET_MODE}
        self._describe(dummy)
        dummy.close()
        del dummy
        if context is None and "fork" in mp.get_all_start_methods():
            context = "fork"
        self._start_workers(env_fns, AUTORESET_MODE, mp.get_context(context),
                            chunk_factory=PettingZooVectorEnv)
        mp_util.Finalize(self, _kill_workers, args=(self.processes,), exitpriority=10)
        self._receive_all()

    def reset(  # type: ignore[override]
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, object] | None = None,
    ) -> tuple[NestedArrays, dict[str, AgentInfo]]:
        seeds = _seeds(seed, self.num_envs)
        self._send_all([("reset", (seeds[a:b], options)) for a, b in self._slices])
        results = self._receive_all()
        return (_concat([r[0] for r in results]),
                _merge_agent_infos([r[1] for r in results]))

    def step(  # type: ignore[override]
        self, actions: Mapping[str, NestedArrays]
    ) -> tuple[NestedArrays, NestedArrays, NestedArrays, NestedArrays, dict[str, AgentInfo]]:
        self._send_all([("step", _split(actions, a, b)) for a, b in self._slices])
        results = self._receive_all()
        obs, rewards, terminated, truncated = (
            _concat([r[k] for r in results]) for k in range(4))
        return obs, rewards, terminated, truncated, _merge_agent_infos([r[4] for r in results])
