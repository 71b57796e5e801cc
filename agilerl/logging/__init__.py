"""Run logging: metrics loggers (CSV, TensorBoard, W&B), live progress and the summary.

The training loops build one :class:`CompositeLogger` per run (see :func:`make_run_loggers`)
and call ``log(metrics)`` once per generation with a flat dict keyed as in the manifest spec
§5.7 (``train/global_step``, ``train/steps_per_second``, ``eval/mean_fitness``,
``eval/best_fitness``, ``train/mean_score``, ``train/agent_{i}/...``,
``eval/agent_{i}/fitness``, hyperparameters). TensorBoard and W&B are imported only when
their logger is created. The population's history goes to the run folder's ``events.jsonl``
(:class:`RunEventLog`, :func:`read_events`; ``docs/run-events.md``).
"""

from __future__ import annotations

from agilerl.logging.base import (
    GLOBAL_STEP_KEY,
    CompositeLogger,
    MetricsLogger,
    run_timestamp,
)
from agilerl.logging.csv_logger import METRICS_CSV_NAME, CSVLogger
from agilerl.logging.events import EVENTS_FILE, RunEventLog, read_events
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
    "EVENTS_FILE",
    "GLOBAL_STEP_KEY",
    "METRICS_CSV_NAME",
    "WANDB_PROJECT",
    "WANDB_PROJECT_MULTI_AGENT",
    "CSVLogger",
    "CompositeLogger",
    "MetricsLogger",
    "ProgressDisplay",
    "RunEventLog",
    "TensorBoardLogger",
    "WandbLogger",
    "WandbSetupError",
    "format_duration",
    "generation_table",
    "make_run_loggers",
    "read_events",
    "render_summary",
    "run_timestamp",
    "summary_rows",
    "tensorboard_run_dir",
    "wandb_run_name",
]
