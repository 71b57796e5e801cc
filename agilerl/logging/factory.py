"""Build a run's loggers from the trainer's options (``train(wb=..., tensorboard=...)``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from agilerl.core.value_types import Options
from agilerl.logging.base import CompositeLogger, MetricsLogger, run_timestamp
from agilerl.logging.csv_logger import CSVLogger
from agilerl.logging.wandb_logger import WANDB_PROJECT

__all__ = ["make_run_loggers"]


def make_run_loggers(
    *,
    algo: str,
    env_name: str,
    csv_path: str | os.PathLike[str] | None = None,
    csv_append: bool = False,
    csv_keep_until_step: int | None = None,
    tensorboard: bool = False,
    tensorboard_log_dir: str | os.PathLike[str] | None = None,
    wb: bool = False,
    wandb_api_key: str | None = None,
    wandb_kwargs: Options | None = None,
    wandb_project: str = WANDB_PROJECT,
    init_hp: Mapping[str, object] | None = None,
    timestamp: str | None = None,
) -> CompositeLogger:
    """The loggers a run asked for, sharing one timestamp; an empty composite if none.

    ``csv_path`` is the run folder or CSV file (``None``: no CSV); ``csv_append`` keeps an
    existing file's rows (resume), less those after ``csv_keep_until_step``. If a later logger fails to start, the ones already
    started are closed before the error propagates.
    """
    stamp = timestamp or run_timestamp()
    loggers: list[MetricsLogger] = []
    try:
        if csv_path is not None:
            loggers.append(CSVLogger(csv_path, append=csv_append,
                                     keep_until_step=csv_keep_until_step))
        if tensorboard:
            from agilerl.logging.tensorboard import TensorBoardLogger

            loggers.append(
                TensorBoardLogger(
                    algo, env_name, log_dir=tensorboard_log_dir, timestamp=stamp, config=init_hp
                )
            )
        if wb:
            from agilerl.logging.wandb_logger import WandbLogger

            loggers.append(
                WandbLogger(
                    algo,
                    env_name,
                    init_hp=init_hp,
                    wandb_api_key=wandb_api_key,
                    wandb_kwargs=wandb_kwargs,
                    project=wandb_project,
                    timestamp=stamp,
                )
            )
    except BaseException:
        CompositeLogger(loggers).close()
        raise
    return CompositeLogger(loggers)
