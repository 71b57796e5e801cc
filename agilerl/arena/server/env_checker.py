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
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from agilerl.arena.server.env_api_checks import CheckFailed, GymChecks, ParallelChecks

#: steps of one random episode before it is cut short (an episode may never end).
MAX_EPISODE_STEPS = 1000
SMOKE_STEPS = 20


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
    if rollouts:
        name, count = "Random rollouts", rollouts
        limit = int(spec.get("max_episode_steps") or MAX_EPISODE_STEPS)
    else:  # a short smoke run: episodes may well last longer
        name, count, limit = "Episode lifecycle", 1, SMOKE_STEPS
    summary: dict[str, Any] = {}

    def lifecycle() -> list[str]:
        warnings, found = checks.episodes(count, limit)
        summary.update(found)
        return warnings if rollouts else []

    if not checker.run(name, lifecycle):
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
