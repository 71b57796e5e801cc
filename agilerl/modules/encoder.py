"""The interface every evolvable encoder implements (MLP, CNN, multi-input, SimBa, LSTM).

An encoder maps a batch of observations (a tensor, or for ``Dict``/``Tuple`` spaces a dict
of tensors keyed by part name) to a ``(batch, out_dim)`` latent vector that the network's
heads read. Like the MLP it is described entirely by a JSON-able ``architecture()`` dict
(which names its ``kind``, the manifest ``arch`` it implements), so a checkpoint rebuilds
it with ``encoder_class(kind)(arch)``; and it changes its own architecture in two phases:
``draw_plan`` decides *what* changes from the caller's numpy generator within the bounds
of its spec, ``mutated(plan)`` applies it deterministically and returns a new module with
the weights transferred (the old one stays valid until the caller swaps it).
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypedDict, cast

import torch
from torch import nn

if TYPE_CHECKING:
    import numpy as np

    from agilerl.core.value_types import Space

#: Architecture-mutation operations a network asks its encoders for (an encoder maps them
#: onto its own changes, e.g. a CNN's ``add_nodes`` adds channels).
ARCH_OPS = ("add_layer", "remove_layer", "add_nodes", "remove_nodes")

#: A batch of observations as an encoder takes it: a tensor, or for ``Dict``/``Tuple``
#: spaces the dict of part batches (part name -> tensor).
EncoderInput: TypeAlias = "torch.Tensor | Mapping[str, torch.Tensor]"


class MutationPlan(TypedDict, total=False):
    """A drawn architecture mutation (JSON-able): ``op`` and ``seed`` always, the rest as
    the op and the module it targets need."""

    op: str
    seed: int
    layer: int
    """Hidden layer (MLP) or convolution (CNN) whose width changes."""
    nodes: int
    channels: int
    kernel: int
    activation: str | None
    module: str
    """Multi-input encoder: ``"mlp"``, ``"part:<name>"`` or ``"latent:<name>"``."""
    target: str
    """Network: ``"encoder:<name>"``, ``"head:<name>"``, ``"latent:<name>"`` or ``"all"``."""


class EncoderArchitecture(TypedDict, total=False):
    """What every encoder's ``architecture()`` has: its ``kind`` (each kind adds its own
    fields)."""

    kind: str


class MLPSettings(TypedDict, total=False):
    """An MLP's settings besides its sizes, as a manifest section and an architecture
    dict both write them."""

    activation: str | None
    output_activation: str | None
    layer_norm: bool
    init_layers: bool
    output_vanish: bool
    min_hidden_layers: int
    max_hidden_layers: int
    min_mlp_nodes: int
    max_mlp_nodes: int


class EncoderConfig(MLPSettings, total=False):
    """A normalised encoder section of a manifest (``model_dump(mode="json")`` of its spec:
    ``MlpSpec``, ``CnnSpec``, ``LstmSpec``, ``SimbaSpec`` or ``MultiInputSpec``), and a
    head's ``MlpSpec``. Each encoder reads its own fields."""

    arch: str
    hidden_size: list[int] | int
    """An MLP's widths; SimBa's residual width (a list when ``simba: true`` turns an MLP
    section into SimBa)."""
    channel_size: list[int]
    kernel_size: list[int]
    stride_size: list[int]
    min_channel_size: int
    max_channel_size: int
    hidden_state_size: int
    num_layers: int
    dropout: float
    min_hidden_state_size: int
    max_hidden_state_size: int
    min_layers: int
    max_layers: int
    num_blocks: int
    scale_factor: int
    min_blocks: int
    max_blocks: int
    latent_dim: int
    min_latent_dim: int
    max_latent_dim: int
    vector_space_mlp: bool
    mlp_config: EncoderConfig
    cnn_config: EncoderConfig | None


def as_plan(plan: Mapping[str, object]) -> MutationPlan:
    """``plan`` read as the :class:`MutationPlan` it is: plans are drawn by ``draw_plan`` (or
    are JSON copies of one) and reach ``mutated`` through the agent protocol as mappings."""
    return cast(MutationPlan, plan)


class EvolvableEncoder(nn.Module, metaclass=ABCMeta):
    """Base class of evolvable encoders (see the module docstring).

    Subclasses set ``kind`` and implement every abstract method. ``__init__(arch,
    generator)`` must rebuild the module from ``architecture()`` alone, drawing initial
    weights from ``generator`` only.
    """

    kind: ClassVar[str]
    arch: Mapping[str, object]

    @classmethod
    @abstractmethod
    def architecture_from_config(
        cls, encoder_config: EncoderConfig, observation_space: Space | int, latent_dim: int
    ) -> EncoderArchitecture:
        """Architecture dict for a normalised ``encoder_config`` (the manifest's encoder
        section, defaults filled) over ``observation_space`` with output width
        ``latent_dim``. Raises ``ValueError`` when the space does not suit this encoder."""

    @property
    @abstractmethod
    def out_dim(self) -> int:
        """Width of the latent vector this encoder outputs."""

    @property
    def activation(self) -> str | None:
        """Name of the hidden activation an ``activation`` mutation changes (None: none)."""
        activation = self.arch.get("activation")
        return activation if isinstance(activation, str) else None

    @abstractmethod
    def architecture(self) -> EncoderArchitecture:
        """JSON-able description, ``kind`` included, that rebuilds this encoder."""

    @abstractmethod
    def draw_plan(
        self, op: str, rng: np.random.Generator, activations: list[str]
    ) -> MutationPlan | None:
        """Random details of architecture mutation ``op`` (one of :data:`ARCH_OPS`) from
        numpy Generator ``rng``, within this encoder's bounds; None when ``op`` is
        impossible. The plan is JSON-able and carries any seed ``mutated`` needs."""

    @abstractmethod
    def mutated(self, plan: Mapping[str, object]) -> EvolvableEncoder:
        """A new encoder with ``plan`` applied and weights transferred. Besides the plans
        of ``draw_plan`` it accepts ``{"op": "activation", "activation": name, "seed": s}``
        (an encoder without a hidden activation returns an unchanged copy)."""

    @abstractmethod
    def preserves_function(self, plan: Mapping[str, object]) -> bool:
        """Whether ``self.mutated(plan)`` computes what this encoder computes (to
        rounding): the mutation then changed the architecture and not the function, and
        what was learned about the function (a lagging target network, optimizer
        moments) still applies."""

    @abstractmethod
    def resized(self, *, out_dim: int, seed: int = 0) -> EvolvableEncoder:
        """A new encoder whose latent width is ``out_dim``, weights transferred."""

    def forward(self, obs: Any) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError
