"""What this package reads of a population member: an LLM algorithm
(:class:`~agilerl.algorithms.core.llm_base.LLMAlgorithm`), which lives on a floor above it.

The environments hand a member their prompts and score what it generates; the vLLM engine
serves its adapter. These protocols name the parts they use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch

if TYPE_CHECKING:
    from agilerl.llm.adapters import SharedBase
    from agilerl.llm.dataset_envs import DatasetEnv

__all__ = ["AdapterMember", "Completions", "DatasetLearner", "Generator"]


class Completions(Protocol):
    """Sampled completions of a batch of prompts (a ``Rollout``), as the environments
    read them."""

    @property
    def completion_ids(self) -> torch.Tensor: ...

    @property
    def completion_mask(self) -> torch.Tensor: ...

    @property
    def texts(self) -> list[str]: ...


class Generator(Protocol):
    """A member that completes token prompts."""

    @property
    def context_limit(self) -> int: ...

    def generate(self, prompts: list[list[int]], *, greedy: bool = False) -> Completions: ...


class DatasetLearner(Protocol):
    """A member scored on a dataset environment's held-out rows."""

    steps: list[int]
    fitness: list[float]
    evaluated_at: int | None

    def evaluate_dataset(self, env: DatasetEnv[object]) -> float: ...


class AdapterMember(Protocol):
    """A member whose LoRA adapter the vLLM engine serves."""

    @property
    def base(self) -> SharedBase: ...

    @property
    def adapter(self) -> str: ...

    @property
    def temperature(self) -> float: ...

    @property
    def spec(self) -> object: ...

    def save_adapter(self, folder: str | os.PathLike[str]) -> Path: ...
