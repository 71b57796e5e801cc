"""Run logging: metrics loggers (CSV, TensorBoard, W&B), live progress and the summary.

The training loops build one :class:`CompositeLogger` per run (see :func:`make_run_loggers`)
and call ``log(metrics)`` once per generation with a flat dict keyed as in the manifest spec
§5.7 (``train/global_step``, ``train/steps_per_second``, ``eval/mean_fitness``,
``eval/best_fitness``, ``train/mean_score``, ``train/agent_{i}/...``,
``eval/agent_{i}/fitness``, hyperparameters). TensorBoard and W&B are imported only when
their logger is created.
"""

from __future__ import annotations

from agilerl.logging.base import (
    GLOBAL_STEP_KEY,
    CompositeLogger,
    MetricsLogger,
    run_timestamp,
)
from agilerl.logging.csv_logger import METRICS_CSV_NAME, CSVLogger
from agilerl.logging.factory import make_run_loggers
from agilerl.logging.progress import ProgressDisplay, format_duration, generation_table
from agilerl.logging.summary import render_summary, summary_rows
from agilerl.logging.tensorboard import (
    DEFAULT_TENSORBOARD_DIR,
    TensorBoardLogger,
    tensorboard_run_dir,
)
from agilerl.logging.wandb_logger import (
    WANDB_PROJECT,
    WANDB_PROJECT_MULTI_AGENT,
    WandbLogger,
    WandbSetupError,
    wandb_run_name,
)

__all__ = [
    "DEFAULT_TENSORBOARD_DIR",
    "GLOBAL_STEP_KEY",
    "METRICS_CSV_NAME",
    "WANDB_PROJECT",
    "WANDB_PROJECT_MULTI_AGENT",
    "CSVLogger",
    "CompositeLogger",
    "MetricsLogger",
    "ProgressDisplay",
    "TensorBoardLogger",
    "WandbLogger",
    "WandbSetupError",
    "format_duration",
    "generation_table",
    "make_run_loggers",
    "render_summary",
    "run_timestamp",
    "summary_rows",
    "tensorboard_run_dir",
    "wandb_run_name",
]
