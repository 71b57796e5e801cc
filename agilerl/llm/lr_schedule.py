"""``cosine_lr_schedule_config``: linear warm-up, then cosine decay, per optimizer step.

The reference's schedule, as a pure function of a member's optimizer-step count ``k``
(0-based: the learning rate used by the ``k``-th update) and its base learning rate
``lr`` (the hyperparameter, which mutation may change; the schedule keeps its position):

* ``W = int(num_epochs * warmup_proportion)`` warm-up steps go linearly from
  ``MIN_LR`` (1e-8) to ``lr``: ``MIN_LR + (lr - MIN_LR) * k / W``;
* then ``MIN_LR + (lr - MIN_LR) * (1 + cos(pi * (k - W) / (2 * (num_epochs - W)))) / 2``:
  the first half of a cosine over twice the remaining steps, so the rate falls strictly,
  reaching the midpoint of ``lr`` and ``MIN_LR`` after ``num_epochs`` steps (torch's
  ``LinearLR`` followed by ``CosineAnnealingLR(T_max=2 * (num_epochs - W), eta_min=MIN_LR)``,
  which is what the reference chains).

With no warm-up (``warmup_proportion`` 0, or ``W`` 0) the decay starts at ``lr`` on the
first step. Every parameter group (LLMPPO's actor and critic) follows the schedule from
its own learning rate. As a pure function of the step count, the schedule survives
checkpoints and selection exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["CosineSchedule"]

_FIELD = "algorithm.cosine_lr_schedule_config"


@dataclass(frozen=True)
class CosineSchedule:
    """Warm-up then cosine decay over ``num_epochs`` optimizer steps (module docstring)."""

    num_epochs: int = 100
    warmup_proportion: float = 0.0
    MIN_LR: ClassVar[float] = 1e-8

    @classmethod
    def from_setting(cls, value: object) -> CosineSchedule | None:
        """The schedule of a manifest value (a mapping, or an object with the two fields;
        None: a constant rate). Raises ``ValueError`` naming the field when malformed."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            value = {name: getattr(value, name) for name in ("num_epochs", "warmup_proportion")
                     if hasattr(value, name)}
        unknown = sorted(set(value) - {"num_epochs", "warmup_proportion"})
        if unknown:
            raise ValueError(f"{_FIELD}.{unknown[0]}: unknown setting (it takes num_epochs "
                             "and warmup_proportion)")
        epochs = value.get("num_epochs", cls.num_epochs)
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"{_FIELD}.num_epochs = {epochs!r}: an integer >= 1 (optimizer "
                             "steps of the schedule)")
        warmup = value.get("warmup_proportion", cls.warmup_proportion)
        if isinstance(warmup, bool) or not isinstance(warmup, int | float) \
                or not 0.0 <= float(warmup) <= 1.0:
            raise ValueError(f"{_FIELD}.warmup_proportion = {warmup!r}: a number in [0, 1]")
        return cls(int(epochs), float(warmup))

    @property
    def warmup_steps(self) -> int:
        return int(self.num_epochs * self.warmup_proportion)

    def lr(self, base: float, step: int) -> float:
        """The learning rate of optimizer step ``step`` (0-based) for base rate ``base``."""
        low, warm = self.MIN_LR, self.warmup_steps
        if step < warm:
            return low + (base - low) * step / warm
        decay = 2 * max(self.num_epochs - warm, 1)
        return low + (base - low) * (1.0 + math.cos(math.pi * (step - warm) / decay)) / 2.0
