"""The run folder's layout: where runs go and the names of what a run writes there.

``runs/{env}-{algo}-{timestamp}/`` holds the resolved manifest, ``metrics.csv`` (one row per
generation), ``events.jsonl`` (the population's history, ``docs/run-events.md``),
``checkpoints/`` and the elite. Trainers write these names and the dashboard, ``agilerl
plot`` and ``agilerl evaluate`` read them; this module imports nothing heavy so the readers
start fast.
"""

from __future__ import annotations

import os
from pathlib import Path

#: environment variable naming the folder automatic run folders go in
RUNS_ENV = "AGILERL_RUNS_DIR"
MANIFEST_FILE = "manifest.yaml"
METRICS_FILE = "metrics.csv"
EVENTS_FILE = "events.jsonl"
CHECKPOINTS_DIR = "checkpoints"
ELITE_FILE = "elite.pt"


def runs_root() -> Path:
    """Where ``runs/{env}-{algo}-{timestamp}`` folders are made: ``$AGILERL_RUNS_DIR`` or
    ``runs`` in the working folder."""
    return Path(os.environ.get(RUNS_ENV) or "runs")
