"""``MATD3Spec``: the MATD3 hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import MultiAgentRLAlgorithmSpec, registered


@registered
class MATD3Spec(gen.MATD3Spec, MultiAgentRLAlgorithmSpec):
    """MATD3 algorithm spec. See the manifest reference for every field."""


__all__ = ["MATD3Spec"]
