"""Arena: submit training manifests to a remote (hosted or self-hosted) training service.

``from agilerl.arena import ArenaClient`` is all most code needs. This package imports
neither torch nor gymnasium, so the client and the ``arena`` command start fast on
machines that do not train.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__all__ = [
    "ArenaAPIError",
    "ArenaAuthError",
    "ArenaClient",
    "ArenaConfigError",
    "ArenaEnvironmentNotFoundError",
    "ArenaError",
    "ArenaFileNotFoundError",
    "ArenaImportError",
    "ArenaInferenceError",
    "ArenaTimeoutError",
    "ArenaTrainer",
    "ArenaTrainingError",
    "ArenaValidationError",
]

_HOMES = {name: "agilerl.arena.errors" for name in __all__ if name.startswith("Arena")}
_HOMES["ArenaClient"] = "agilerl.arena.client"
_HOMES["ArenaTrainer"] = "agilerl.arena.trainer"


def __getattr__(name: str) -> type[object]:
    module = _HOMES.get(name)
    if module is None:
        raise AttributeError(f"module 'agilerl.arena' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover
    from agilerl.arena.client import ArenaClient
    from agilerl.arena.errors import (
        ArenaAPIError,
        ArenaAuthError,
        ArenaConfigError,
        ArenaEnvironmentNotFoundError,
        ArenaError,
        ArenaFileNotFoundError,
        ArenaImportError,
        ArenaInferenceError,
        ArenaTimeoutError,
        ArenaTrainingError,
        ArenaValidationError,
    )
    from agilerl.arena.trainer import ArenaTrainer
