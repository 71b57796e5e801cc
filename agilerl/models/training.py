"""Training budget and replay buffer specs (fields from ``schemas/sections/``), with the
training rules a schema cannot state (spec §3.3, X6)."""

from __future__ import annotations

from pydantic import ValidationInfo, model_validator

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import raise_first, skip_rules
from agilerl.models.rules import training_rules

ReplayBufferSpec = gen.ReplayBufferSpec
NStepBufferArgs = gen.NStepBufferArgs
PerBufferArgs = gen.PerBufferArgs


@public
class TrainingSpec(gen.TrainingSpec):
    """How long to train and how the population is evaluated and evolved over time."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> TrainingSpec:
        if not skip_rules(info):
            raise_first(training_rules(self))
        return self

    @property
    def pop_size_given(self) -> bool:
        """Whether ``pop_size`` (or ``population_size``) was written explicitly."""
        return "pop_size" in self.model_fields_set


__all__ = ["NStepBufferArgs", "PerBufferArgs", "ReplayBufferSpec", "TrainingSpec"]
