"""Check an uploaded environment against the Gymnasium or PettingZoo API, or profile it.

    python -m agilerl.arena.server.env_checker SPEC.json

Runs in the environment's own virtual environment, in a subprocess the server started with
CPU-time, memory and wall-clock limits (:mod:`agilerl.arena.server.env_validation`). The
spec names the source folder, the entrypoint, the constructor keyword arguments and what
to do. Results go to the original stdout as one JSON object per line:

* ``{"start": CHECK}`` before each check (so a killed run still names the check it was in);
* ``{"check": CHECK, "success": bool, "warnings": [...], "error": str | null}`` after it;
* ``{"result": {...}}`` once at the end (the profile's metrics for ``mode: profile``).

What the environment itself prints is sent to stderr, so it can never forge a result.
The entrypoint is loaded exactly as the trainer loads it
(:func:`agilerl.envs.entrypoint.resolve_entrypoint` with the source folder as ``path``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

#: steps of one random episode before it is cut short (an episode may never end).
MAX_EPISODE_STEPS = 1000
SMOKE_STEPS = 20


class CheckFailed(Exception):
    """A check did not pass; the message says why."""


def _load_resolver() -> Callable[..., Any]:
    """``resolve_entrypoint`` without importing :mod:`agilerl.envs` (which loads every vector
    env and, through them, far more than a check needs under a memory limit)."""
    import agilerl

    file = Path(agilerl.__file__).parent / "envs" / "entrypoint.py"
    spec = importlib.util.spec_from_file_location("_agilerl_entrypoint", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.resolve_entrypoint  # type: ignore[no-any-return]


def _short(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "MemoryError: the environment ran out of memory (the server's memory limit)"
    text = f"{type(exc).__name__}: {exc}".strip()
    ours = str(Path(__file__).resolve().parents[2])  # the agilerl package
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not f.filename.startswith(("<", ours))]
    if user:
        last = user[-1]
        text += f" (at {Path(last.filename).name}:{last.lineno})"
    return text[:2000]


class Checker:
    """Runs named checks in order; the first failure ends the run."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def emit(self, payload: dict[str, Any]) -> None:
        self.out.write(json.dumps(payload, default=str) + "\n")
        self.out.flush()

    def run(self, name: str, fn: Callable[[], list[str] | None]) -> bool:
        self.emit({"start": name})
        try:
            warnings = fn() or []
        except CheckFailed as exc:
            self.emit({"check": name, "success": False, "warnings": [], "error": str(exc)})
            return False
        except BaseException as exc:  # noqa: BLE001 - user code may raise anything
            self.emit({"check": name, "success": False, "warnings": [], "error": _short(exc)})
            return False
        self.emit({"check": name, "success": True, "warnings": warnings, "error": None})
        return True


# ---- space checks ---------------------------------------------------------------------


def _space_check(space: Any, what: str) -> list[str]:
    from gymnasium import spaces

    if not isinstance(space, spaces.Space):
        raise CheckFailed(f"{what} must be a gymnasium.spaces.Space, got {type(space).__name__}")
    warnings = []
    if isinstance(space, spaces.Box):
        if not (math.prod(space.shape) > 0 if space.shape else True):
            raise CheckFailed(f"{what} has an empty shape {space.shape}")
        if not (space.bounded_below.all() and space.bounded_above.all()):
            warnings.append(f"{what} has infinite bounds")
    if isinstance(space, spaces.Discrete) and int(space.n) < 1:
        raise CheckFailed(f"{what} is Discrete with n={space.n}")
    return warnings


def _describe(value: Any) -> str:
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    return f"{type(value).__name__} {value!r}"[:200]


def _in_space(value: Any, space: Any, what: str) -> None:
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
    if not space.contains(value):
        raise CheckFailed(f"{what} is not in its space {space}: {_describe(value)}")


def _equal(a: Any, b: Any) -> bool:
    import numpy as np

    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (TypeError, ValueError):
        return bool(a == b)


def _reward(value: Any, what: str) -> float:
    import numpy as np

    scalar = isinstance(value, int | float | np.integer | np.floating) or (
        isinstance(value, np.ndarray) and value.shape == ())
    if isinstance(value, bool) or not scalar:
        raise CheckFailed(f"{what} must be a number, got {_describe(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise CheckFailed(f"{what} is not finite: {number}")
    return number


def _flag(value: Any, what: str) -> bool:
    import numpy as np

    if not isinstance(value, bool | np.bool_):
        raise CheckFailed(f"{what} must be a bool, got {_describe(value)}")
    return bool(value)


# ---- Gymnasium ------------------------------------------------------------------------


class GymChecks:
    """Checks of a single-agent ``gymnasium.Env``."""

    def __init__(self, env: Any) -> None:
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
        first, _ = self.env.reset(seed=123)
        second, _ = self.env.reset(seed=123)
        if not _equal(first, second):
            return ["reset(seed=123) twice gave different observations: seeding is not"
                    " deterministic"]
        self.env.reset(seed=None, options=None)
        return []

    def step(self) -> list[str]:
        self.env.reset(seed=0)
        self.env.action_space.seed(0)
        out = self.env.step(self.env.action_space.sample())
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

    def episodes(self, count: int, max_steps: int) -> tuple[list[str], dict[str, Any]]:
        """``count`` random episodes (each cut at ``max_steps``); checks every step."""
        warnings: list[str] = []
        lengths, returns = [], []
        for episode in range(count):
            self.env.reset(seed=episode)
            total, steps, done = 0.0, 0, False
            while not done and steps < max_steps:
                obs, reward, terminated, truncated, _ = self.env.step(
                    self.env.action_space.sample())
                _in_space(obs, self.env.observation_space, f"episode {episode} step {steps}"
                          " observation")
                total += _reward(reward, f"episode {episode} step {steps} reward")
                done = _flag(terminated, "terminated") or _flag(truncated, "truncated")
                steps += 1
            if not done:
                warnings.append(f"episode {episode} did not end within {max_steps} steps")
            lengths.append(steps)
            returns.append(total)
        summary = {"episodes": count, "mean_length": sum(lengths) / max(1, len(lengths)),
                   "mean_return": sum(returns) / max(1, len(returns))}
        return warnings[:5], summary

    def step_once(self) -> None:
        _, _, terminated, truncated, _ = self.env.step(self.env.action_space.sample())
        if terminated or truncated:
            self.env.reset()


# ---- PettingZoo -------------------------------------------------------------------------


class ParallelChecks:
    """Checks of a multi-agent ``pettingzoo.ParallelEnv``."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def agents(self) -> list[Any]:
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

    def _dicts(self, out: Any, names: tuple[str, ...], what: str) -> tuple[Any, ...]:
        if not (isinstance(out, tuple) and len(out) == len(names)):
            raise CheckFailed(f"{what} must return {len(names)} dicts ({', '.join(names)}),"
                              f" got {_describe(out)}")
        for name, value in zip(names, out, strict=True):
            if not isinstance(value, dict):
                raise CheckFailed(f"{what} {name} must be a dict keyed by agent,"
                                  f" got {_describe(value)}")
        return tuple(out)

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
        first, _ = self.env.reset(seed=123)
        second, _ = self.env.reset(seed=123)
        if not _equal(first, second):
            return ["reset(seed=123) twice gave different observations"]
        return []

    def _actions(self) -> dict[Any, Any]:
        return {a: self.env.action_space(a).sample() for a in self.env.agents}

    def step(self) -> list[str]:
        self.env.reset(seed=0)
        for agent in self.env.agents:
            self.env.action_space(agent).seed(0)
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

    def episodes(self, count: int, max_steps: int) -> tuple[list[str], dict[str, Any]]:
        warnings: list[str] = []
        lengths = []
        for episode in range(count):
            self.env.reset(seed=episode)
            steps = 0
            while self.env.agents and steps < max_steps:
                obs, rewards, _, _, _ = self.env.step(self._actions())
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

    def step_once(self) -> None:
        if not self.env.agents:
            self.env.reset()
        self.env.step(self._actions())


# ---- driver -------------------------------------------------------------------------------


def _build(spec: dict[str, Any], checker: Checker) -> Any:
    """Resolve the entrypoint and construct the environment; None when a check failed."""
    entrypoint = str(spec["entrypoint"])
    holder: dict[str, Any] = {}

    def path_check() -> list[str]:
        module, sep, attr = entrypoint.rpartition(":")
        if not sep or not module or not attr:
            raise CheckFailed(f"'{entrypoint}' is not of the form module:Class")
        return []

    def import_check() -> list[str]:
        resolve = _load_resolver()
        holder["factory"] = resolve(entrypoint, spec["source"])
        return []

    def construct() -> list[str]:
        holder["rss_before"] = _rss_bytes()
        holder["env"] = holder["factory"](**(spec.get("config") or {}))
        return []

    for name, fn in (("Environment class path", path_check),
                     ("Class exists in path", import_check),
                     ("Preliminary environment", construct)):
        if not checker.run(name, fn):
            return None
    spec["_rss_before"] = holder["rss_before"]
    return holder["env"]


def _rss_bytes() -> int:
    """This process's resident memory now (Linux), else its peak so far."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _kind_check(env: Any, multi_agent: bool) -> list[str]:
    if multi_agent:
        if callable(getattr(env, "action_space", None)) and hasattr(env, "possible_agents"):
            return []
        raise CheckFailed(f"{type(env).__name__} is not a PettingZoo ParallelEnv (it needs"
                          " possible_agents and action_space(agent)); upload it as"
                          " single-agent if it is a Gymnasium env")
    if callable(getattr(env, "action_space", None)) or hasattr(env, "possible_agents"):
        raise CheckFailed(f"{type(env).__name__} looks like a PettingZoo env; upload it with"
                          " --multi-agent")
    if not (hasattr(env, "reset") and hasattr(env, "step")):
        raise CheckFailed(f"{type(env).__name__} has no reset()/step(): not a Gymnasium Env")
    return []


def validate(spec: dict[str, Any], checker: Checker) -> dict[str, Any] | None:
    env = _build(spec, checker)
    if env is None:
        return None
    multi = bool(spec.get("multi_agent"))
    if not checker.run("Environment type", lambda: _kind_check(env, multi)):
        return None
    checks = ParallelChecks(env) if multi else GymChecks(env)
    steps: list[tuple[str, Callable[[], list[str] | None]]] = [
        ("Action space", checks.action_space),
        ("Observation space", checks.observation_space),
        ("Reset", checks.reset),
        ("Reset seed", checks.reset_seed),
        ("Step", checks.step),
    ]
    for name, fn in steps:
        if not checker.run(name, fn):
            return None
    rollouts = int(spec.get("rollouts") or 0)
    summary: dict[str, Any] = {}

    def lifecycle() -> list[str]:
        warnings, found = checks.episodes(max(1, rollouts), int(spec.get("max_episode_steps")
                                                                or MAX_EPISODE_STEPS)
                                          if rollouts else SMOKE_STEPS)
        summary.update(found)
        return warnings

    if not checker.run("Random rollouts" if rollouts else "Episode lifecycle", lifecycle):
        return None
    return {"env_class": type(env).__name__, **summary}


def profile(spec: dict[str, Any], checker: Checker) -> dict[str, Any] | None:
    """Step one environment copy with random actions for ``seconds`` and measure it."""
    env = _build(spec, checker)
    if env is None:
        return None
    multi = bool(spec.get("multi_agent"))
    checks = ParallelChecks(env) if multi else GymChecks(env)
    seconds = float(spec.get("seconds") or 2.0)
    metrics: dict[str, Any] = {}

    def measure() -> list[str]:
        env.reset(seed=0)
        steps, peak = 0, 0.0
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        window_wall, window_cpu = start_wall, start_cpu
        while True:
            checks.step_once()
            steps += 1
            now = time.perf_counter()
            if now - window_wall >= 0.25:
                cpu = time.process_time()
                peak = max(peak, (cpu - window_cpu) / (now - window_wall))
                window_wall, window_cpu = now, cpu
            if now - start_wall >= seconds:
                break
        wall = time.perf_counter() - start_wall
        avg = (time.process_time() - start_cpu) / wall
        # memory of one copy: what building and stepping it added to the process
        grown = max(_rss_bytes() - int(spec["_rss_before"]), 0)
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        metrics.update(steps_per_second=round(steps / wall, 1), avg_cpu_per_env=round(avg, 3),
                       peak_cpu_per_env=round(max(peak, avg), 3),
                       memory_per_env_gb=round(grown / 2**30, 6),
                       peak_rss_gb=round(peak_kib / 2**20, 4), steps=steps)
        return []

    if not checker.run("Profile", measure):
        return None
    return metrics


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(args[0]).read_text())
    # Results go to a private copy of stdout; fd 1 becomes stderr so the environment's own
    # prints cannot pass for results.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    checker = Checker(out)
    mode = spec.get("mode", "validate")
    result = profile(spec, checker) if mode == "profile" else validate(spec, checker)
    if result is None:
        return 1
    checker.emit({"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
