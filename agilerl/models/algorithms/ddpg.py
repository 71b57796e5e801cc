"""``DDPGSpec``: the DDPG hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import RLAlgorithmSpec, registered


@registered
class DDPGSpec(gen.DDPGSpec, RLAlgorithmSpec):
    """DDPG algorithm spec. See the manifest reference for every field."""


__all__ = ["DDPGSpec"]
