"""TensorBoard scalars through tensorboardX."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agilerl.logging.base import MetricsLogger, as_scalar, run_timestamp

if TYPE_CHECKING:
    from tensorboardX import SummaryWriter

__all__ = ["DEFAULT_TENSORBOARD_DIR", "TensorBoardLogger", "tensorboard_run_dir"]

DEFAULT_TENSORBOARD_DIR = "tensorboard_logs"


def tensorboard_run_dir(
    log_dir: str | os.PathLike[str] | None, algo: str, env_name: str, timestamp: str | None = None
) -> Path:
    """``{log_dir}/{algo}-{env_name}-{timestamp}``; slashes in names become ``_``."""
    label = f"{algo}-{env_name}-{timestamp or run_timestamp()}".replace("/", "_")
    return Path(log_dir or DEFAULT_TENSORBOARD_DIR) / label


class TensorBoardLogger(MetricsLogger):
    """Writes every numeric metric as a scalar at ``step`` (default: the global step).

    Non-numeric values (e.g. an activation name) and non-finite ones (a NaN fitness; the CSV
    keeps those) are skipped; ``config`` (the manifest) is stored once as text so a run's
    settings travel with its curves.
    """

    def __init__(
        self,
        algo: str,
        env_name: str,
        log_dir: str | os.PathLike[str] | None = None,
        timestamp: str | None = None,
        config: Mapping[str, object] | None = None,
    ):
        from tensorboardX import SummaryWriter

        self.run_dir = tensorboard_run_dir(log_dir, algo, env_name, timestamp)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._writer: SummaryWriter | None = SummaryWriter(logdir=str(self.run_dir))
        if config:
            text = json.dumps(dict(config), indent=2, default=str)
            self._writer.add_text("config", f"```\n{text}\n```", global_step=0)

    def log(self, metrics: Mapping[str, object], step: int | None = None) -> None:
        if self._writer is None:
            raise RuntimeError("TensorBoardLogger is closed")
        global_step = self.step_of(metrics, step)
        for key, value in metrics.items():
            scalar = as_scalar(value)
            if scalar is not None and math.isfinite(scalar):
                self._writer.add_scalar(key, scalar, global_step=global_step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
