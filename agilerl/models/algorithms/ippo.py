"""``IPPOSpec``: the IPPO hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import MultiAgentRLAlgorithmSpec, registered


@registered
class IPPOSpec(gen.IPPOSpec, MultiAgentRLAlgorithmSpec):
    """IPPO algorithm spec. See the manifest reference for every field."""


__all__ = ["IPPOSpec"]
