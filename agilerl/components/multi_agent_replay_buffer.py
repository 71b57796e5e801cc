"""Replay of joint multi-agent transitions (MADDPG, MATD3).

A joint transition holds, for every agent, its observation, action, reward, next
observation and ``done`` flag (plus any other per-agent field, e.g. ``active``): each field
is a dict agent id -> batch over the sub-envs of a vector env. The buffer stores one flat
column per (field, agent) in the preallocated ring of :class:`ReplayBuffer` (named
``"field/agent"``), so a vector step is one slice assignment per column, sampling draws the
same rows of every column (the agents' parts of a sample always come from the same joint
step), and checkpoints need nothing new.

Episode boundaries: ``add(..., valid=mask)`` keeps only the rows whose mask is True. With
the ``NEXT_STEP`` autoreset of the vector envs, the step after a sub-env's episode ended
only resets it (its actions are ignored, its observation starts a new episode); passing
that step's mask as ``valid`` keeps such rows out, so no stored transition has an
observation from one episode and a next observation from another.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from agilerl.components.replay_buffer import ReplayBuffer

SEPARATOR = "/"


class MultiAgentReplayBuffer(ReplayBuffer):
    """Uniform replay of joint transitions (fields are dicts agent -> batch, see module docs).

    ``sample`` returns the same nesting: ``{field: {agent: rows}}``.
    """

    def add(  # type: ignore[override]
        self, transitions: Mapping[str, Mapping[str, ArrayLike]] | None = None, *,
        valid: ArrayLike | None = None, **fields: Mapping[str, ArrayLike],
    ) -> None:
        """Add a batch of joint transitions; ``valid`` (bool per row) drops the rows that
        are not transitions (NEXT_STEP autoreset steps)."""
        joint = {**(transitions or {}), **fields}
        flat = flatten(joint)
        if valid is not None:
            keep = np.asarray(valid, dtype=bool).reshape(-1)
            if not keep.all():
                flat = {k: v[keep] for k, v in flat.items()}
        super().add(flat)

    def sample(  # type: ignore[override]
        self, batch_size: int, rng: np.random.Generator | None = None
    ) -> dict[str, dict[str, np.ndarray]]:
        """``batch_size`` joint transitions drawn uniformly with replacement."""
        return unflatten(super().sample(batch_size, rng))

    @property
    def agent_ids(self) -> list[str]:
        """Agents stored so far, in the order they were first added."""
        seen = dict.fromkeys(key.split(SEPARATOR, 1)[1] for key in self._data)
        return list(seen)


def flatten(joint: Mapping[str, object]) -> dict[str, np.ndarray]:
    """``{field: {agent: batch}}`` -> ``{"field/agent": batch}``."""
    flat: dict[str, np.ndarray] = {}
    for field, per_agent in joint.items():
        if not isinstance(per_agent, Mapping):
            raise TypeError(
                f"multi-agent transition field {field!r} must map agent ids to batches, "
                f"got {type(per_agent).__name__}"
            )
        for agent, batch in per_agent.items():
            flat[f"{field}{SEPARATOR}{agent}"] = np.asarray(batch)
    return flat


def unflatten(flat: Mapping[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """Inverse of :func:`flatten`."""
    joint: dict[str, dict[str, np.ndarray]] = {}
    for key, batch in flat.items():
        field, _, agent = key.partition(SEPARATOR)
        joint.setdefault(field, {})[agent] = batch
    return joint
