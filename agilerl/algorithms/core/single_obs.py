"""Acting on one observation (a plain env's) as well as on a batch (a vector env's).

Acting methods are written for batches, one row per sub-env of a vector env. A plain
Gymnasium env, or a plain PettingZoo parallel env, gives one observation instead:
:func:`acts_on_single` lets a batch method take either. An observation whose shape is its
space's own (not one more dimension in front) is given a batch dimension of one, and every
array the method returns loses it again, so a plain env gets actions it accepts: a numpy
integer for ``Discrete``, an array of the space's shape for ``Box``.

Multi-agent (the agent has ``agent_ids``): the observation is a dict agent id -> value. A
plain PettingZoo env leaves out the agents that are done, so an absent agent is given a
zero observation (as the vector envs do), and the returned dicts hold only the agents
that were observed (a plain env expects actions for its live agents only).

A batch is passed through untouched: training loops, which always act on vector envs,
get exactly what they got before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector.utils import create_empty_array

from agilerl.core.value_types import Space

if TYPE_CHECKING:
    from agilerl.algorithms.core.multi_agent import MultiAgentRLAlgorithm

F = TypeVar("F", bound=Callable[..., object])


def is_single(space: Space, value: Any) -> bool:
    """Whether ``value`` is one observation of ``space`` (not a batch of them)."""
    if isinstance(space, spaces.Dict):
        key = next(iter(space.spaces), None)
        return (key is not None and isinstance(value, Mapping) and key in value
                and is_single(space[key], value[key]))
    if isinstance(space, spaces.Tuple):
        return (isinstance(value, tuple | list) and len(space.spaces) > 0
                and len(value) == len(space.spaces) and is_single(space[0], value[0]))
    if isinstance(space, spaces.Discrete):
        return bool(np.ndim(value) == 0)
    shape = getattr(space, "shape", None)
    return shape is not None and np.shape(value) == tuple(shape)


def add_batch(value: object) -> object:
    """One observation -> a batch of one (dicts and tuples element by element)."""
    if isinstance(value, Mapping):
        return {k: add_batch(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return tuple(add_batch(v) for v in value)
    return np.expand_dims(np.asarray(value), 0)


def drop_batch(value: object) -> object:
    """A batch of one -> its only element (dicts and tuples element by element)."""
    if isinstance(value, Mapping):
        return {k: drop_batch(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(drop_batch(v) for v in value)
    if isinstance(value, np.ndarray | torch.Tensor) and value.ndim > 0 and len(value) == 1:
        return value[0]
    return value


def _single_agents(agent: MultiAgentRLAlgorithm, obs: object) -> list[str] | None:
    """The agents observed in ``obs`` when it holds one observation each, else None."""
    if not isinstance(obs, Mapping):
        return None
    present = [a for a in agent.agent_ids if a in obs]
    if not present or not is_single(agent.observation_spaces[present[0]], obs[present[0]]):
        return None
    return present


def _batched_agents(agent: MultiAgentRLAlgorithm, obs: Mapping[str, object]
                    ) -> dict[str, object]:
    return {a: add_batch(obs[a]) if a in obs
            else create_empty_array(agent.observation_spaces[a], 1, fn=np.zeros)
            for a in agent.agent_ids}


def _observed_only(value: object, present: Sequence[str]) -> object:
    """Per-agent outputs (a dict, or a tuple of dicts) for the ``present`` agents, unbatched."""
    if isinstance(value, tuple):
        return tuple(_observed_only(v, present) for v in value)
    if isinstance(value, Mapping):
        return {a: drop_batch(value[a]) for a in present if a in value}
    return drop_batch(value)


def acts_on_single(method: F) -> F:
    """Let an acting method ``method(self, obs, ...)`` written for batches also take one
    observation (see the module docstring)."""

    @functools.wraps(method)
    def wrapper(self: Any, obs: Any, *args: object, **kwargs: object) -> object:
        if hasattr(self, "agent_ids"):
            present = _single_agents(self, obs)
            if present is None:
                return method(self, obs, *args, **kwargs)
            out = method(self, _batched_agents(self, obs), *args, **kwargs)
            return _observed_only(out, present)
        if not is_single(self.observation_space, obs):
            return method(self, obs, *args, **kwargs)
        return drop_batch(method(self, add_batch(obs), *args, **kwargs))

    return cast(F, wrapper)
