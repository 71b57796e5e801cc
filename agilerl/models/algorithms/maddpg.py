"""``MADDPGSpec``: the MADDPG hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import MultiAgentRLAlgorithmSpec, registered


@registered
class MADDPGSpec(gen.MADDPGSpec, MultiAgentRLAlgorithmSpec):
    """MADDPG algorithm spec. See the manifest reference for every field."""


__all__ = ["MADDPGSpec"]
