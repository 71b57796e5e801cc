"""RL algorithms (maths per algorithm; shared plumbing in ``agilerl.algorithms.core``).

Each implementation is one module (``dqn.py``, ``ppo.py``) that registers its class with
:func:`~agilerl.algorithms.core.registry.registered`; ``from agilerl.algorithms import DQN``
finds any registered class by its name, loading its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.core.registry import (
    NotImplementedAlgorithmError,
    algorithm_class,
    build_algorithm,
    implemented,
    registered,
)

if TYPE_CHECKING:
    from agilerl.algorithms.core.member_state import MemberState

__all__ = [
    "NotImplementedAlgorithmError",
    "RLAlgorithm",
    "algorithm_class",
    "build_algorithm",
    "implemented",
    "registered",
]


def __getattr__(name: str) -> type[MemberState]:
    from agilerl.algorithms.core.registry import IMPLEMENTATIONS, load

    cls = IMPLEMENTATIONS.get(name) or load(name)
    if cls is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return cls


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(implemented()))
