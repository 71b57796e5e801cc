"""How long one step of an environment takes, timed on a probe copy: what decides, when a
manifest leaves ``environment.sync`` unset, whether sub-envs step in this process or in
worker processes (:func:`agilerl.envs.gym_env.vector_mode`).

Stepping in worker processes pays an inter-process round trip per vector step, and while
an env has worker processes the population's members cannot train in worker processes of
their own (``docs/training.md``, "Members in parallel"). For an env whose step costs tens
of microseconds (Pendulum, MountainCar, Acrobot) that is far more than the stepping
itself: ``td3_pendulum`` (4 sub-envs, 2 members) trained 2.4 times as many steps per second
in this process (``docs/speed.md``). Where the copies' steps together cost more than
:data:`IN_PROCESS_BUDGET_S`, worker processes can win, so they are kept.

The timing is taken once per environment definition in a process and cached; the choice
changes no result (sub-env ``i`` gets seed ``seed + i`` either way).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Hashable

import gymnasium

#: Sub-envs step in this process when one step of all of them is timed below this.
IN_PROCESS_BUDGET_S = 0.002

#: Steps timed on the probe copy (after a reset, which is not timed).
PROBE_STEPS = 16

_step_seconds: dict[Hashable, float | None] = {}


def step_seconds(key: Hashable, make_env: Callable[[], gymnasium.Env]) -> float | None:
    """The median time of one step of ``make_env()`` under random actions (seeded), cached
    under ``key``; None when the copy cannot be built or stepped (the caller keeps its
    default, and the real build reports the error)."""
    if key not in _step_seconds:
        _step_seconds[key] = _time_steps(make_env)
    return _step_seconds[key]


def _time_steps(make_env: Callable[[], gymnasium.Env]) -> float | None:
    env: gymnasium.Env | None = None
    try:
        env = make_env()
        env.reset(seed=0)
        env.action_space.seed(0)
        times = []
        for _ in range(PROBE_STEPS):
            action = env.action_space.sample()
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            times.append(time.perf_counter() - start)
            if terminated or truncated:
                env.reset()
        return statistics.median(times)
    except Exception:  # noqa: BLE001 - any failure: no timing, the build reports it
        return None
    finally:
        if env is not None:
            with contextlib.suppress(Exception):  # closing a probe copy must not fail a build
                env.close()
