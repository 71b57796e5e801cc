"""``NeuralUCBSpec``: the NeuralUCB hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import NeuralBanditSpec, registered


@registered
class NeuralUCBSpec(gen.NeuralUCBSpec, NeuralBanditSpec):
    """NeuralUCB algorithm spec. See the manifest reference for every field."""


__all__ = ["NeuralUCBSpec"]
