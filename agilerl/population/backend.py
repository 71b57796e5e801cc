"""The backend protocol the generation loop is written against."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class TrainReport:
    """What one ``train(member, steps)`` call did."""

    steps: int
    """Environment steps taken (summed over sub-envs)."""
    score: float = math.nan
    """Mean return of the training episodes that finished (NaN when none did)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Algorithm metrics averaged over the learning updates (e.g. ``loss``)."""
    seconds: float = 0.0
    """Wall time of the call."""


class MemberTrainer(Protocol):
    """Collects experience for one member and lets it learn: the paradigm-specific half."""

    def __call__(self, agent: Any, steps: int, *, seed: int) -> TrainReport: ...


@runtime_checkable
class PopulationBackend(Protocol):
    """Members addressed by slot index ``0..len-1``."""

    def __len__(self) -> int: ...

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        """Train ``member`` for about ``steps`` env steps; the env is reset from ``seed``."""
        ...

    def evaluate(self, member: int, *, seed: int) -> float:
        """Evaluate ``member`` greedily (env reset from ``seed``); return and record fitness."""
        ...

    def get_state(self, member: int) -> dict[str, Any]:
        """A picklable snapshot of ``member`` (weights, optimiser, hyperparameters, ...)."""
        ...

    def set_state(self, member: int, state: Mapping[str, Any]) -> None:
        """Replace ``member`` with ``state`` (architecture included)."""
        ...

    def apply_mutation(
        self, operator: Any, *, pre_training: bool = False, members: Sequence[int] | None = None
    ) -> None:
        """Apply a mutation operator to every member (or only ``members``), in slot order."""
        ...

    def set_hyperparameters(self, member: int, values: Mapping[str, Any]) -> None:
        """Give ``member`` these hyperparameter values (learning rates reach its optimizers)."""
        ...

    def steps(self, member: int) -> int:
        """Env steps ``member`` has trained for."""
        ...

    def hyperparameters(self, member: int) -> dict[str, Any]:
        """Current (possibly mutated) hyperparameters of ``member``, for logging."""
        ...
