"""``NeuralTSSpec``: the NeuralTS hyperparameters (fields and defaults from ``schemas/``)."""

from agilerl.models import _generated as gen
from agilerl.models.algo import NeuralBanditSpec, registered


@registered
class NeuralTSSpec(gen.NeuralTSSpec, NeuralBanditSpec):
    """NeuralTS algorithm spec. See the manifest reference for every field."""


__all__ = ["NeuralTSSpec"]
