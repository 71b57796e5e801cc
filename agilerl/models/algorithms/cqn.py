"""``CQNSpec``: the CQN hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import RLAlgorithmSpec, registered


@registered
class CQNSpec(gen.CQNSpec, RLAlgorithmSpec):
    """CQN algorithm spec. See the manifest reference for every field."""


__all__ = ["CQNSpec"]
