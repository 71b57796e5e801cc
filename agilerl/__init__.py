"""agilerl: evolutionary reinforcement learning driven by declarative training manifests.

Importing this package is cheap: the trainers (which need torch) and the manifest models are
loaded on first attribute access.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "LocalTrainer": "agilerl.training.trainer",
    "Trainer": "agilerl.training.trainer",
    "ArenaTrainer": "agilerl.arena.trainer",
    "TrainingManifest": "agilerl.models",
    "AgentType": "agilerl.models",
}


def _installed(*modules: str) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in modules)


HAS_LLM_DEPENDENCIES: bool = _installed("transformers", "peft", "datasets", "accelerate")
"""True when the ``[llm]`` extra is installed (LLM algorithms can be built and trained)."""

HAS_ARENA_DEPENDENCIES: bool = _installed("httpx")
"""True when the Arena client can be used (it needs only httpx, a core dependency)."""

__all__ = [
    "HAS_ARENA_DEPENDENCIES",
    "HAS_LLM_DEPENDENCIES",
    "AgentType",
    "ArenaTrainer",
    "LocalTrainer",
    "Trainer",
    "TrainingManifest",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agilerl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # pragma: no cover
    from agilerl.arena.trainer import ArenaTrainer
    from agilerl.models import AgentType, TrainingManifest
    from agilerl.training.trainer import LocalTrainer, Trainer
