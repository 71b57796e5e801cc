"""The Arena algorithm registry and the base algorithm spec classes (light, no torch).

``ARENA_REGISTRY`` maps each algorithm the hosted service trains to its Arena spec class;
:func:`register` adds a custom spec to it, so manifests naming it validate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from agilerl.arena.models._generated import (
    AlgoSpec,
    LLMAlgorithmSpec,
    MultiAgentRLAlgorithmSpec,
    RLAlgorithmSpec,
)
from agilerl.arena.models.manifest import ARENA_REGISTRY

AlgorithmSpec = AlgoSpec
"""The base of every Arena algorithm spec (the reference's name for it)."""

SpecT = TypeVar("SpecT", bound=type[AlgoSpec])


def register() -> Callable[[SpecT], SpecT]:
    """Class decorator: add an algorithm spec to ``ARENA_REGISTRY`` under its class name
    without ``Spec`` (``MyAlgoSpec`` -> ``"MyAlgo"``)."""

    def decorator(spec_class: SpecT) -> SpecT:
        ARENA_REGISTRY[spec_class.__name__.removesuffix("Spec")] = spec_class
        return spec_class

    return decorator


__all__ = [
    "ARENA_REGISTRY", "AlgoSpec", "AlgorithmSpec", "LLMAlgorithmSpec",
    "MultiAgentRLAlgorithmSpec", "RLAlgorithmSpec", "register",
]
