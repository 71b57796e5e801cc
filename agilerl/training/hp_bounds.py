"""The mutation bounds of a run's hyperparameters, which every member is built with.

Both population builders read them (:func:`agilerl.training.build.make_population` for RL
members, :func:`agilerl.training.llm.make_llm_population` for LLM adapters), so they live
here, below both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.models.hpo import MutationSpec


def hp_config(algorithm_spec: object,
              mutation_spec: MutationSpec | None) -> Mapping[str, object] | None:
    """The algorithm's own ``hp_config`` when it has one, else the mutation section's
    ``rl_hp_selection`` (name -> bounds); None when neither gives any."""
    spec_hp: Mapping[str, object] | None = getattr(algorithm_spec, "hp_config", None)
    if spec_hp:
        return spec_hp
    selection = getattr(mutation_spec, "rl_hp_selection", None) if mutation_spec is not None \
        else None
    return dict(selection) if selection else None
