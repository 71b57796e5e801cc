"""``rl_hp_selection`` ranges (``RLHyperparameter`` models or dicts) as plain dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agilerl.models.hpo import RLHyperparameter


def plain_hp_config(
    selection: Mapping[str, RLHyperparameter | Mapping[str, float]] | None,
) -> dict[str, dict[str, float]]:
    """name -> ``{min, max, grow_factor, shrink_factor}``; missing factors are filled by
    validating with the generated ``RLHyperparameter`` model (the defaults' one home)."""
    if not selection:
        return {}
    out: dict[str, dict[str, float]] = {}
    for name, value in selection.items():
        if not hasattr(value, "model_dump"):
            import agilerl.models.hpo as models

            value = models.RLHyperparameter.model_validate(dict(value))
        out[str(name)] = {k: float(v) for k, v in value.model_dump().items()}
    return out
