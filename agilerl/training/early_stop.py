"""The ``training.target_score`` early-stop rule.

Rule: after each generation the loop records the population's best evaluation fitness (the
best member's mean return over its ``eval_loop`` evaluation episodes). Training stops at the
end of the first generation where the mean of the last ``window`` recorded best fitnesses is
at least ``target_score`` (``window`` defaults to 3 generations, fewer only if ``max_steps``
ends the run first). Requiring a short run of good generations rather than one lucky
evaluation keeps a fluke from stopping a run, and unlike the reference library's rule (every
member above the target for 10 generations, and never before generation 100) it stops a run
that has plainly solved the task within a few generations. NaN or infinite fitnesses count
as failing the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

DEFAULT_WINDOW = 3


@dataclass
class EarlyStopping:
    """Tracks the per-generation best fitness and decides when ``target_score`` is reached."""

    target_score: float | None
    window: int = DEFAULT_WINDOW
    history: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"early-stop window must be >= 1, got {self.window}")

    def record(self, fitnesses: Sequence[float]) -> None:
        """Record one generation's evaluation fitnesses (one value per member)."""
        finite = [f for f in fitnesses if math.isfinite(f)]
        self.history.append(max(finite) if finite else math.nan)

    @property
    def recent_mean(self) -> float:
        """Mean best fitness over the last ``window`` generations (NaN if fewer recorded)."""
        if len(self.history) < self.window:
            return math.nan
        recent = self.history[-self.window :]
        return math.fsum(recent) / len(recent)

    def should_stop(self) -> bool:
        """True once the recent best fitnesses reach ``target_score`` (never if it is None)."""
        if self.target_score is None:
            return False
        mean = self.recent_mean
        return math.isfinite(mean) and mean >= self.target_score

    def state_dict(self) -> dict[str, object]:
        return {"target_score": self.target_score, "window": self.window,
                "history": list(self.history)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        history = state.get("history", [])
        assert isinstance(history, list)
        self.history = [float(x) for x in history]
