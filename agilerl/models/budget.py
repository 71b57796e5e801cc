"""Budgets that would exhaust the machine before training starts: buffers larger than memory.

Sizes are estimated from the environment's spaces when they are known, else from a floor of
one number per observation and action (so an estimate never overstates the need).
"""

from __future__ import annotations

import os

from agilerl.models.env_checks import Finding
from agilerl.models.env_spaces import Spaces


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine (None when the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _gib(size: float) -> str:
    return f"{size / (1 << 30):,.1f} GiB"


def check_replay_memory(max_size: int, spaces: Spaces | None, env_id: str | None,
                        memory: int | None = None) -> Finding | None:
    """An error when a replay buffer of ``max_size`` transitions cannot fit in memory.

    A transition stores the observation twice (before and after), the action, the reward
    and the done flag; without known spaces, one number per observation and action is the
    (optimistic) floor.
    """
    obs = (spaces.obs_values or 1) * (spaces.obs_itemsize or 4) if spaces else 4
    action = (spaces.action_values or 1) * 8 if spaces else 8
    return _memory_finding("a replay buffer", max_size, 2 * obs + action + 8 + 1, spaces,
                           env_id, memory)


def check_rollout_memory(learn_step: int, spaces: Spaces | None, env_id: str | None,
                         memory: int | None = None) -> Finding | None:
    """An error when a rollout of ``learn_step`` transitions (on-policy: observation as
    float32, action, log-probability, value, reward, flags, advantage, return) cannot fit."""
    obs = (spaces.obs_values or 1) * 4 if spaces else 4
    action = (spaces.action_values or 1) * 8 if spaces else 8
    return _memory_finding("a rollout (learn_step)", learn_step, obs + action + 7 * 4 + 1,
                           spaces, env_id, memory)


def _memory_finding(what: str, count: int, per_transition: int, spaces: Spaces | None,
                    env_id: str | None, memory: int | None) -> Finding | None:
    memory = machine_memory_bytes() if memory is None else memory
    need = count * per_transition
    if memory is None or need <= memory:
        return None
    if spaces is not None and spaces.obs_values is not None:
        detail = (f"{per_transition:,} bytes each: {env_id}'s observations are "
                  f"{spaces.obs_values:,} {spaces.obs_dtype} values")
    else:
        detail = f"at least {per_transition} bytes each"
    return Finding("error", f"{what} of {count:,} transitions needs about {_gib(need)} "
                   f"({detail}); this machine has {_gib(memory)} of memory. At most about "
                   f"{memory // per_transition:,} transitions fit")
