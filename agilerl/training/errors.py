"""Exceptions and spec facts shared across ``agilerl.training`` (a leaf: imports nothing of it).

``trainer``, ``build``, ``session`` and ``resume`` all import from here, so the package's
imports point one way: trainer -> session -> build/resume -> errors.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

__all__ = [
    "TrainingAborted",
    "TrainingInterrupted",
    "UnsupportedAlgorithmError",
    "algo_meta",
    "algo_name",
]


class UnsupportedAlgorithmError(NotImplementedError):
    """The manifest is valid but asks for something this version cannot train yet."""


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a stop signal after writing a checkpoint (``checkpoint``).

    ``signum`` is the signal that asked for the stop (``SIGINT`` for Ctrl-C, ``SIGTERM``).
    """

    def __init__(self, checkpoint: Path | None, signum: int = signal.SIGINT) -> None:
        super().__init__(f"training interrupted; checkpoint: {checkpoint}")
        self.checkpoint = checkpoint
        self.signum = int(signum)


class TrainingAborted(KeyboardInterrupt):
    """A second stop signal: training stopped at once, without a new checkpoint (the last
    one written stays valid)."""

    def __init__(self, signum: int) -> None:
        super().__init__("aborted without a new checkpoint (the last one written stays valid)")
        self.signum = int(signum)


def algo_meta(spec: Any, name: str, default: Any = None) -> Any:
    """Per-algorithm registry metadata (``off_policy``, ``default_evo_steps``, ...)."""
    for source in (spec, type(spec)):
        value = getattr(source, name, None)
        if value is not None and not callable(value):
            return value
    return default


def algo_name(spec: Any) -> str:
    """Registered name of an algorithm spec (``"DQN"``)."""
    return str(getattr(spec, "algo_name", None) or getattr(spec, "name", type(spec).__name__))
