"""``DQNSpec``: the DQN hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import RLAlgorithmSpec, registered


@registered
class DQNSpec(gen.DQNSpec, RLAlgorithmSpec):
    """DQN algorithm spec. See the manifest reference for every field."""


__all__ = ["DQNSpec"]
