"""What value-based agents with a target network share: soft target updates, batch tensors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import torch

from agilerl.networks.base import EvolvableNetwork
from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.optim import Adam

#: A sampled batch: field -> rows (numpy from replay memory, tensors from an offline dataset).
Experiences: TypeAlias = Mapping[str, np.ndarray | torch.Tensor]


class SoftTargetUpdate:
    """``soft_update()`` for an agent whose ``actor_target`` trails ``actor`` by ``tau``.

    The parameter lists are cached until either network is replaced (a mutation or a load
    builds new modules), so an update is one fused ``lerp`` over all parameters.
    """

    actor: EvolvableNetwork  # (the agent's own network class)
    actor_target: EvolvableNetwork
    optimizers: dict[str, Adam]
    tau: float

    @torch.no_grad()
    def soft_update(self) -> None:
        """theta_target <- tau * theta + (1 - tau) * theta_target."""
        target, online = self._param_pairs()
        torch._foreach_lerp_(target, online, self.tau)

    def _flat_training(self) -> FlatTraining | None:
        """The flat buffers of the online and target networks and the optimizer (see
        :mod:`agilerl.networks.flat_params`), rebuilt when any of them was replaced."""
        optimizer = self.optimizers["optimizer"]
        flat = self.__dict__.get("_flat")
        if flat is not None and flat.bound_to(self.actor, self.actor_target, optimizer):
            return flat
        if flat is None and self.__dict__.get("_flat_refused") == (
                self.actor, self.actor_target, optimizer):
            return None
        flat = FlatTraining.build(self.actor, self.actor_target, optimizer)
        self.__dict__["_flat"] = flat
        self.__dict__["_flat_refused"] = None if flat else (
            self.actor, self.actor_target, optimizer)
        self.__dict__.pop("_pairs_key", None)  # the soft update's cached tensors are stale
        return flat

    def _param_pairs(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        key = (id(self.actor_target), id(self.actor))
        if getattr(self, "_pairs_key", None) != key:
            self._pairs_key = key
            self._pairs: tuple[list[torch.Tensor], list[torch.Tensor]] = (
                [p.data for p in self.actor_target.parameters()],
                [p.data for p in self.actor.parameters()],
            )
        return self._pairs


def batch_tensor(value: torch.Tensor | npt.ArrayLike, device: torch.device, dtype: torch.dtype
                 ) -> torch.Tensor:
    """A sampled batch field as a tensor of ``dtype`` on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=dtype)
    return torch.as_tensor(np.asarray(value), dtype=dtype, device=device)


@torch.no_grad()
def clip_grad_norm(parameters: list[torch.Tensor], max_norm: float) -> None:
    """Scale the gradients of ``parameters`` so their joint L2 norm is at most ``max_norm``
    (``torch.nn.utils.clip_grad_norm_`` without its per-call checks: one foreach pass)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
