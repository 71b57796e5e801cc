"""``rl_hp_selection`` ranges (``RLHyperparameter`` models or dicts) as plain dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast


def plain_hp_config(
    selection: Mapping[str, object] | None,
) -> dict[str, dict[str, float]]:
    """name -> ``{min, max, grow_factor, shrink_factor}``; missing factors are filled by
    validating with the generated ``RLHyperparameter`` model (the defaults' one home).
    A value is an ``RLHyperparameter`` (or any model) or a mapping of its fields."""
    if not selection:
        return {}
    out: dict[str, dict[str, float]] = {}
    for name, value in selection.items():
        dump = getattr(value, "model_dump", None)
        if dump is None:
            import agilerl.models.hpo as models

            fields = dict(cast(Mapping[str, float], value))
            dump = models.RLHyperparameter.model_validate(fields).model_dump
        out[str(name)] = {k: float(v) for k, v in dump().items()}
    return out
