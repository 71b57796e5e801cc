"""The metrics-logger interface the training loops call once per generation."""

from __future__ import annotations

import logging
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import TracebackType

__all__ = [
    "GLOBAL_STEP_KEY",
    "CompositeLogger",
    "MetricsLogger",
    "as_scalar",
    "run_timestamp",
]

log = logging.getLogger(__name__)

GLOBAL_STEP_KEY = "train/global_step"
"""The metrics key holding the total env steps so far (the x-axis of every logger)."""


def run_timestamp() -> str:
    """Timestamp used in run names and folders; create it once per run and share it."""
    return datetime.now().strftime("%Y%m%d-%H%M%S")


def as_scalar(value: object) -> float | None:
    """``value`` as a float when it is a real number (bools, NumPy and 0-d torch included)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 1) == 0:
        try:
            scalar = item()
        except (TypeError, ValueError):
            return None
        return float(scalar) if isinstance(scalar, numbers.Real) else None
    return None


class MetricsLogger(ABC):
    """Receives a flat metrics dict (keys as in the manifest spec §5.7) per generation."""

    @abstractmethod
    def log(self, metrics: Mapping[str, object], step: int | None = None) -> None:
        """Record ``metrics``; ``step`` defaults to ``metrics["train/global_step"]``."""

    def close(self) -> None:  # noqa: B027 - optional hook, most loggers hold a resource
        """Flush and release files or runs; safe to call twice."""

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @staticmethod
    def step_of(metrics: Mapping[str, object], step: int | None) -> int | None:
        if step is not None:
            return int(step)
        value = as_scalar(metrics.get(GLOBAL_STEP_KEY))
        return int(value) if value is not None else None


class CompositeLogger(MetricsLogger):
    """Fans each call out to several loggers; closing closes all even if one fails."""

    def __init__(self, loggers: Iterable[MetricsLogger] = ()):
        self.loggers: list[MetricsLogger] = list(loggers)

    def add(self, logger: MetricsLogger) -> None:
        self.loggers.append(logger)

    def log(self, metrics: Mapping[str, object], step: int | None = None) -> None:
        for logger in self.loggers:
            logger.log(metrics, step)

    def close(self) -> None:
        first_error: BaseException | None = None
        for logger in self.loggers:
            try:
                logger.close()
            except Exception as exc:  # keep closing the others; report the first
                log.warning("closing %s failed: %s", type(logger).__name__, exc)
                first_error = first_error or exc
        if first_error is not None:
            raise first_error
