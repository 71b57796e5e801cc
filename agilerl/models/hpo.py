"""Mutation and selection specs (fields from ``schemas/sections/``), with the multi-frequency
(MF-PBT) rules a schema cannot state (spec §3.6, X5 and X10)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Discriminator, Tag, ValidationInfo, model_validator

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import raise_first, skip_rules
from agilerl.models.rules import (
    MFLayout,
    Violation,
    default_frequency_ratios,
    frequency_ratio_rules,
    mf_layout,
)

MutationSpec = gen.MutationSpec
MutationProbabilities = gen.MutationProbabilities
RLHyperparameter = gen.RLHyperparameter
TournamentSelectionSpec = gen.TournamentSelectionSpec


@public
class MultiFrequencySelectionSpec(gen.MultiFrequencySelectionSpec):
    """Multi-frequency population-based training: sub-populations evolving at different
    rates. Bracket sizes left null are resolved from the population size."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> MultiFrequencySelectionSpec:
        if not self.evolution_frequency_ratios:
            self.evolution_frequency_ratios = default_frequency_ratios(self.n_subpopulations)
        if not skip_rules(info):
            raise_first(frequency_ratio_rules(self))
        return self

    def resolve_layout(self, pop_size: int, pop_size_given: bool = True) -> MFLayout:
        """Fill the null bracket sizes for ``pop_size`` agents and write them back; raises
        ``ValueError`` when the layout is impossible."""
        layout, violations = mf_layout(self, pop_size, pop_size_given)
        raise_first(violations)
        assert layout is not None
        self.n_winners = layout.n_winners
        self.n_survivors = layout.n_survivors
        self.n_open_for_migration = layout.n_open_for_migration
        self.n_losers = layout.n_losers
        return layout

    def subpopulation_of(self, slot: int, pop_size: int) -> int:
        """Sub-population id of population slot ``slot``."""
        return slot // (pop_size // self.n_subpopulations)


MUTATION_KINDS = ("no_mut", "arch_mut", "params_mut", "act_mut", "rl_hp_mut")
"""The probabilities one mutation kind per member is drawn with (``new_layer`` is not one:
it splits ``arch_mut`` between layer and node changes)."""


def zero_left_out_kinds(mutation: object) -> list[str]:
    """Set to 0 the mutation kinds left out of a written ``probabilities`` block whose
    written kinds already sum to 1 (or more); return their names.

    Without this a kind left out takes its default (``rl_hp_mut: 0.2``, ...), and kinds
    written to sum to 1 would silently sum to 1.2 and be normalised. When the written kinds
    sum to less than 1, left-out kinds keep their defaults.
    """
    probabilities = getattr(mutation, "probabilities", None)
    written = getattr(probabilities, "model_fields_set", None)
    if not written:
        return []
    left_out = [kind for kind in MUTATION_KINDS if kind not in written]
    given = [getattr(probabilities, kind) for kind in MUTATION_KINDS if kind in written]
    if not left_out or not all(isinstance(v, int | float) for v in given) \
            or float(sum(given)) < 1.0 - 1e-9:
        return []
    for kind in left_out:
        setattr(probabilities, kind, 0.0)
    return left_out


def probability_sum_note(mutation: object) -> list[Violation]:
    """A warning when the mutation-kind probabilities do not sum to 1: they are normalised
    (each divided by the sum) when the mutation operator is built. An all-zero or negative
    set is left to the error rules."""
    probabilities = getattr(mutation, "probabilities", None)
    written = [getattr(probabilities, kind, None) for kind in MUTATION_KINDS]
    values = [float(v) for v in written if isinstance(v, int | float)]
    if len(values) != len(MUTATION_KINDS):
        return []
    total = float(sum(values))
    if total <= 0 or min(values) < 0 or abs(total - 1.0) <= 1e-9:
        return []
    parts = " + ".join(f"{kind} {value:g}" for kind, value in zip(MUTATION_KINDS, values, strict=True))
    return [Violation(("probabilities",), f"the mutation probabilities sum to {total:g}, not "
                      f"1 ({parts}); they are normalised (each divided by {total:g})",
                      "warning")]


def _strategy(value: object) -> object:
    if isinstance(value, dict):
        return value.get("strategy", "tournament")
    return getattr(value, "strategy", "tournament")


SelectionStrategySpec = Annotated[
    Annotated[TournamentSelectionSpec, Tag("tournament")]
    | Annotated[MultiFrequencySelectionSpec, Tag("multi_frequency")],
    Discriminator(_strategy),
]
"""A selection block: tournament (the default when ``strategy`` is omitted) or MF-PBT."""

SELECTION_SPECS: dict[str, type[TournamentSelectionSpec | MultiFrequencySelectionSpec]] = {
    "tournament": TournamentSelectionSpec,
    "multi_frequency": MultiFrequencySelectionSpec,
}
"""``strategy`` tag → selection spec class."""

__all__ = [
    "MUTATION_KINDS", "MultiFrequencySelectionSpec", "MutationProbabilities", "MutationSpec",
    "RLHyperparameter", "SELECTION_SPECS", "SelectionStrategySpec", "TournamentSelectionSpec",
    "probability_sum_note", "zero_left_out_kinds",
]
