"""Which members can learn together: the batched updates of every algorithm that has one.

A group class has ``key(agent)`` (members with equal keys can learn together; None when
the agent cannot), is built from the members of one key, and has ``learn(members,
batches)``: one learning update of those members, each on its own batch (what its
``learn`` takes), returning each member's metrics.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from agilerl.algorithms.stacked_ppo import StackedPPOGroup
from agilerl.algorithms.stacked_update import StackedGroup

#: The group classes, by the algorithms they batch (DQN and CQN; PPO).
GROUPS: tuple[type[StackedGroup], type[StackedPPOGroup]] = (StackedGroup, StackedPPOGroup)


def group_key(agent: object
              ) -> tuple[type[StackedGroup] | type[StackedPPOGroup], Hashable] | None:
    """Members with equal keys can take their updates together; None when this agent has
    no batched update."""
    for group in GROUPS:
        key = group.key(agent)
        if key is not None:
            return (group, key)
    return None


def make_group(agents: Sequence[Any]) -> StackedGroup | StackedPPOGroup:
    """The group of ``agents`` (which share one :func:`group_key`)."""
    key = group_key(agents[0])
    assert key is not None, "agents without a batched update have no group"
    return key[0](agents)
