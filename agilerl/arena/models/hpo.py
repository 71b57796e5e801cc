"""Arena mutation and tournament selection specs (Arena runs tournament selection only)."""

from agilerl.arena.models._generated import (
    MutationProbabilities,
    MutationSpec,
    RLHyperparameter,
    TournamentSelectionSpec,
)

__all__ = ["MutationProbabilities", "MutationSpec", "RLHyperparameter", "TournamentSelectionSpec"]
