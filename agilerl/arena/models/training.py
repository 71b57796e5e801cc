"""Arena training budget and replay buffer specs."""

from agilerl.arena.models._generated import (
    NStepBufferArgs,
    PerBufferArgs,
    ReplayBufferSpec,
    TrainingSpec,
)

__all__ = ["NStepBufferArgs", "PerBufferArgs", "ReplayBufferSpec", "TrainingSpec"]
