"""``GSPOSpec``: the GSPO hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import LLMAlgorithmSpec, registered


@registered
class GSPOSpec(gen.GSPOSpec, LLMAlgorithmSpec):
    """GSPO algorithm spec. See the manifest reference for every field."""


__all__ = ["GSPOSpec"]
