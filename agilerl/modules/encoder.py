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
from typing import Any, ClassVar

import torch
from torch import nn

#: Architecture-mutation operations a network asks its encoders for (an encoder maps them
#: onto its own changes, e.g. a CNN's ``add_nodes`` adds channels).
ARCH_OPS = ("add_layer", "remove_layer", "add_nodes", "remove_nodes")


class EvolvableEncoder(nn.Module, metaclass=ABCMeta):
    """Base class of evolvable encoders (see the module docstring).

    Subclasses set ``kind`` and implement every abstract method. ``__init__(arch,
    generator)`` must rebuild the module from ``architecture()`` alone, drawing initial
    weights from ``generator`` only.
    """

    kind: ClassVar[str]
    arch: dict[str, Any]

    @classmethod
    @abstractmethod
    def architecture_from_config(
        cls, encoder_config: Mapping[str, Any], observation_space: Any, latent_dim: int
    ) -> dict[str, Any]:
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
        return self.arch.get("activation")

    @abstractmethod
    def architecture(self) -> dict[str, Any]:
        """JSON-able description, ``kind`` included, that rebuilds this encoder."""

    @abstractmethod
    def draw_plan(self, op: str, rng: Any, activations: list[str]) -> dict[str, Any] | None:
        """Random details of architecture mutation ``op`` (one of :data:`ARCH_OPS`) from
        numpy Generator ``rng``, within this encoder's bounds; None when ``op`` is
        impossible. The plan is JSON-able and carries any seed ``mutated`` needs."""

    @abstractmethod
    def mutated(self, plan: Mapping[str, Any]) -> EvolvableEncoder:
        """A new encoder with ``plan`` applied and weights transferred. Besides the plans
        of ``draw_plan`` it accepts ``{"op": "activation", "activation": name, "seed": s}``
        (an encoder without a hidden activation returns an unchanged copy)."""

    @abstractmethod
    def preserves_function(self, plan: Mapping[str, Any]) -> bool:
        """Whether ``self.mutated(plan)`` computes what this encoder computes (to
        rounding): the mutation then changed the architecture and not the function, and
        what was learned about the function (a lagging target network, optimizer
        moments) still applies."""

    @abstractmethod
    def resized(self, *, out_dim: int, seed: int = 0) -> EvolvableEncoder:
        """A new encoder whose latent width is ``out_dim``, weights transferred."""

    def forward(self, obs: Any) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError
