"""``TD3Spec``: the TD3 hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import RLAlgorithmSpec, registered


@registered
class TD3Spec(gen.TD3Spec, RLAlgorithmSpec):
    """TD3 algorithm spec. See the manifest reference for every field."""


__all__ = ["TD3Spec"]
