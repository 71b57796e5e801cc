"""Capture and restore the process-wide random number generators (python, numpy, torch)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import torch
from numpy.typing import NDArray

if TYPE_CHECKING:
    from typing import NotRequired


class RngState(TypedDict):
    """The global generators' states, as :func:`capture_rng_state` returns them."""

    python: tuple[object, ...]
    numpy: dict[str, object] | tuple[str, NDArray[np.uint32], int, int, float]
    torch: torch.Tensor
    torch_cuda: NotRequired[list[torch.Tensor]]


def capture_rng_state() -> RngState:
    """Return the state of python's, numpy's and torch's global generators."""
    state: RngState = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: RngState) -> None:
    """Restore generator states captured by :func:`capture_rng_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "torch_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch global generators from one integer."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def derive_seed(base: int, *parts: int) -> int:
    """A seed for one phase of a run (e.g. generation, member), independent of call order.

    Mixing with numpy's SeedSequence gives well-spread, platform-independent 32-bit seeds.
    """
    return int(np.random.SeedSequence([base, *parts]).generate_state(1)[0])
