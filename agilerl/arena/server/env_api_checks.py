"""The Gymnasium and PettingZoo API checks :mod:`.env_checker` runs on an upload.

Each check method returns its warnings or raises :class:`CheckFailed` saying what is
wrong (``reset() observation has shape (3,), but the space declares (1,)``). The ``env``
they check is the checker's stand-in for the hosted environment: its spaces were rebuilt
from their description and its ``reset``/``step`` return the values the host sent, so the
checks judge data only and never run upload code.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

from agilerl.arena.server.env_wire import UnsupportedSpace, type_name

if TYPE_CHECKING:
    from agilerl.arena.server.env_checker import RemoteGymEnv, RemoteParallelEnv
    from agilerl.core.value_types import Space


class CheckFailed(Exception):
    """A check did not pass; the message says why."""


# ---- space checks ---------------------------------------------------------------------


def _space_check(space: object, what: str) -> list[str]:
    from gymnasium import spaces

    if isinstance(space, UnsupportedSpace):
        raise CheckFailed(f"{what} is {space.text}; this server checks Box, Discrete,"
                          " MultiDiscrete, MultiBinary, Dict and Tuple spaces")
    if not isinstance(space, spaces.Space):
        raise CheckFailed(f"{what} must be a gymnasium.spaces.Space, got {type_name(space)}")
    warnings = []
    if isinstance(space, spaces.Box):
        if not (math.prod(space.shape) > 0 if space.shape else True):
            raise CheckFailed(f"{what} has an empty shape {space.shape}")
        if not (space.bounded_below.all() and space.bounded_above.all()):
            warnings.append(f"{what} has infinite bounds")
    if isinstance(space, spaces.Discrete) and int(space.n) < 1:
        raise CheckFailed(f"{what} is Discrete with n={space.n}")
    return warnings


def _describe(value: object) -> str:
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    return f"{type_name(value)} {value!r}"[:200]


def _in_space(value: object, space: object, what: str) -> None:
    import numpy as np
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        arr = value if isinstance(value, np.ndarray) else None
        if arr is None:
            raise CheckFailed(f"{what} should be a numpy array of shape {space.shape} and dtype"
                              f" {space.dtype}, got {_describe(value)}")
        if arr.shape != space.shape:
            raise CheckFailed(f"{what} has shape {arr.shape}, but the space declares"
                              f" {space.shape}")
        if not np.can_cast(arr.dtype, space.dtype):
            raise CheckFailed(f"{what} has dtype {arr.dtype}, which the space's dtype"
                              f" {space.dtype} cannot hold")
    space = checked_space(space)
    if not space.contains(value):
        raise CheckFailed(f"{what} is not in its space {space}: {_describe(value)}")


def _equal(a: object, b: object) -> bool:
    import numpy as np

    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (TypeError, ValueError):
        return bool(a == b)


def _reward(value: object, what: str) -> float:
    import numpy as np

    scalar = isinstance(value, int | float | np.integer | np.floating) or (
        isinstance(value, np.ndarray) and value.shape == ())
    if isinstance(value, bool) or not scalar:
        raise CheckFailed(f"{what} must be a number, got {_describe(value)}")
    assert isinstance(value, int | float | np.integer | np.floating | np.ndarray)  # scalar
    number = float(value)
    if not math.isfinite(number):
        raise CheckFailed(f"{what} is not finite: {number}")
    return number


def _flag(value: object, what: str) -> bool:
    import numpy as np

    if not isinstance(value, bool | np.bool_):
        raise CheckFailed(f"{what} must be a bool, got {_describe(value)}")
    return bool(value)


def checked_space(space: object) -> Space:
    """A space the ``action_space``/``observation_space`` check already found to be a
    gymnasium space (the checks run in order and the first failure ends the run)."""
    from gymnasium import spaces

    assert isinstance(space, spaces.Space)
    return space


# What the host answered for a call is checked where a check needs its shape; elsewhere it
# is unpacked as it came, and a malformed answer raises, which fails the check.


def _pair(out: object) -> tuple[object, object]:
    return cast("tuple[object, object]", out)


def _step(out: object) -> tuple[object, object, object, object, object]:
    return cast("tuple[object, object, object, object, object]", out)


def _agent_step(out: object) -> tuple[dict[object, object], dict[object, object], object,
                                        object, object]:
    return cast("tuple[dict[object, object], dict[object, object], object, object, object]",
                out)


# ---- Gymnasium ------------------------------------------------------------------------


class GymChecks:
    """Checks of a single-agent ``gymnasium.Env``."""

    def __init__(self, env: RemoteGymEnv) -> None:
        self.env = env

    def action_space(self) -> list[str]:
        return _space_check(getattr(self.env, "action_space", None), "action_space")

    def observation_space(self) -> list[str]:
        return _space_check(getattr(self.env, "observation_space", None), "observation_space")

    def reset(self) -> list[str]:
        out = self.env.reset(seed=0)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise CheckFailed(f"reset() must return (observation, info), got {_describe(out)}")
        obs, info = out
        if not isinstance(info, dict):
            raise CheckFailed(f"reset() info must be a dict, got {_describe(info)}")
        _in_space(obs, self.env.observation_space, "reset() observation")
        return []

    def reset_seed(self) -> list[str]:
        first, _ = _pair(self.env.reset(seed=123))
        second, _ = _pair(self.env.reset(seed=123))
        if not _equal(first, second):
            return ["reset(seed=123) twice gave different observations: seeding is not"
                    " deterministic"]
        self.env.reset(seed=None, options=None)
        return []

    def step(self) -> list[str]:
        self.env.reset(seed=0)
        action_space = checked_space(self.env.action_space)
        action_space.seed(0)
        out = self.env.step(action_space.sample())
        if not (isinstance(out, tuple) and len(out) == 5):
            raise CheckFailed("step() must return (observation, reward, terminated, truncated,"
                              f" info), got {_describe(out)}")
        obs, reward, terminated, truncated, info = out
        _in_space(obs, self.env.observation_space, "step() observation")
        _reward(reward, "step() reward")
        _flag(terminated, "step() terminated")
        _flag(truncated, "step() truncated")
        if not isinstance(info, dict):
            raise CheckFailed(f"step() info must be a dict, got {_describe(info)}")
        return []

    def episodes(self, count: int, max_steps: int) -> tuple[list[str], dict[str, float]]:
        """``count`` random episodes (each cut at ``max_steps``); checks every step. The
        steps are asked for in batches (``env.batch``/``env.steps``) so that a rollout
        costs few round trips to the host."""
        warnings: list[str] = []
        lengths, returns = [], []
        action_space = checked_space(self.env.action_space)
        for episode in range(count):
            self.env.reset(seed=episode)
            total, steps, done = 0.0, 0, False
            while not done and steps < max_steps:
                actions = [action_space.sample()
                           for _ in range(self.env.batch(max_steps - steps))]
                for obs, reward, terminated, truncated, _ in map(_step, self.env.steps(actions)):
                    _in_space(obs, self.env.observation_space,
                              f"episode {episode} step {steps} observation")
                    total += _reward(reward, f"episode {episode} step {steps} reward")
                    done = _flag(terminated, "terminated") or _flag(truncated, "truncated")
                    steps += 1
                    if done:
                        break
            if not done:
                warnings.append(f"episode {episode} did not end within {max_steps} steps")
            lengths.append(steps)
            returns.append(total)
        summary = {"episodes": count, "mean_length": sum(lengths) / max(1, len(lengths)),
                   "mean_return": sum(returns) / max(1, len(returns))}
        return warnings[:5], summary


# ---- PettingZoo -------------------------------------------------------------------------


class ParallelChecks:
    """Checks of a multi-agent ``pettingzoo.ParallelEnv``."""

    def __init__(self, env: RemoteParallelEnv) -> None:
        self.env = env

    def agents(self) -> list[object]:
        agents = list(getattr(self.env, "possible_agents", []) or [])
        if not agents:
            raise CheckFailed("possible_agents is empty or missing")
        return agents

    def action_space(self) -> list[str]:
        return [w for a in self.agents()
                for w in _space_check(self.env.action_space(a), f"action_space({a!r})")]

    def observation_space(self) -> list[str]:
        return [w for a in self.agents()
                for w in _space_check(self.env.observation_space(a),
                                      f"observation_space({a!r})")]

    def _dicts(self, out: object, names: tuple[str, ...], what: str
               ) -> tuple[dict[object, object], ...]:
        if not (isinstance(out, tuple) and len(out) == len(names)):
            raise CheckFailed(f"{what} must return {len(names)} dicts ({', '.join(names)}),"
                              f" got {_describe(out)}")
        dicts: list[dict[object, object]] = []
        for name, value in zip(names, out, strict=True):
            if not isinstance(value, dict):
                raise CheckFailed(f"{what} {name} must be a dict keyed by agent,"
                                  f" got {_describe(value)}")
            dicts.append(value)
        return tuple(dicts)

    def reset(self) -> list[str]:
        obs, _ = self._dicts(self.env.reset(seed=0), ("observations", "infos"), "reset()")
        agents = list(self.env.agents)
        if set(obs) != set(agents):
            raise CheckFailed(f"reset() observations are keyed {sorted(map(str, obs))},"
                              f" agents are {sorted(map(str, agents))}")
        for agent in agents:
            _in_space(obs[agent], self.env.observation_space(agent),
                      f"reset() observation of {agent!r}")
        return []

    def reset_seed(self) -> list[str]:
        first, _ = _pair(self.env.reset(seed=123))
        second, _ = _pair(self.env.reset(seed=123))
        if not _equal(first, second):
            return ["reset(seed=123) twice gave different observations"]
        return []

    def _actions(self) -> dict[object, object]:
        return {a: checked_space(self.env.action_space(a)).sample() for a in self.env.agents}

    def step(self) -> list[str]:
        self.env.reset(seed=0)
        for agent in self.env.agents:
            checked_space(self.env.action_space(agent)).seed(0)
        names = ("observations", "rewards", "terminations", "truncations", "infos")
        obs, rewards, terms, truncs, _ = self._dicts(self.env.step(self._actions()), names,
                                                     "step()")
        for agent, value in obs.items():
            _in_space(value, self.env.observation_space(agent), f"step() observation of {agent!r}")
        for agent in rewards:
            _reward(rewards[agent], f"step() reward of {agent!r}")
            _flag(terms.get(agent, False), f"step() termination of {agent!r}")
            _flag(truncs.get(agent, False), f"step() truncation of {agent!r}")
        return []

    def episodes(self, count: int, max_steps: int) -> tuple[list[str], dict[str, float]]:
        warnings: list[str] = []
        lengths = []
        for episode in range(count):
            self.env.reset(seed=episode)
            steps = 0
            while self.env.agents and steps < max_steps:
                actions = [{a: checked_space(self.env.action_space(a)).sample()
                            for a in self.agents()}
                           for _ in range(self.env.batch(max_steps - steps))]
                for obs, rewards, _, _, _ in map(_agent_step, self.env.steps(actions)):
                    for agent, value in obs.items():
                        _in_space(value, self.env.observation_space(agent),
                                  f"episode {episode} step {steps} observation of {agent!r}")
                    for agent, value in rewards.items():
                        _reward(value, f"episode {episode} step {steps} reward of {agent!r}")
                    steps += 1
            if self.env.agents:
                warnings.append(f"episode {episode} did not end within {max_steps} steps")
            lengths.append(steps)
        return warnings[:5], {"episodes": count,
                              "mean_length": sum(lengths) / max(1, len(lengths))}

