"""Per-generation metrics as a CSV file in the run folder."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from agilerl.logging.base import GLOBAL_STEP_KEY, MetricsLogger, as_scalar
from agilerl.run_folder import METRICS_FILE

__all__ = ["METRICS_CSV_NAME", "CSVLogger"]

METRICS_CSV_NAME = METRICS_FILE


def _cell(value: object) -> object:
    if value is None:
        return ""
    scalar = as_scalar(value)
    if scalar is not None and not isinstance(value, bool):
        return int(scalar) if isinstance(value, int) else scalar
    return value


class CSVLogger(MetricsLogger):
    """One row per ``log`` call; one column per metric key.

    Columns keep the order in which keys were first seen (``train/global_step`` first).
    A key that appears after rows were written adds a column: the file is rewritten
    atomically with the wider header and earlier rows get empty cells. Each row is flushed
    as it is written, so the file is complete up to the last generation if a run dies.

    Args:
        path: the CSV file, or a folder (then ``folder/metrics.csv``).
        append: keep rows of an existing file (resuming a run) instead of starting afresh.
        keep_until_step: with ``append``, drop the kept rows logged after this global step:
            a run resumed from a checkpoint at that step logs them again, so the file holds
            each step once.
    """

    def __init__(self, path: str | os.PathLike[str], append: bool = False,
                 keep_until_step: int | None = None):
        target = Path(path)
        if target.suffix.lower() != ".csv":
            target = target / METRICS_CSV_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        self.path = target
        self.fields: list[str] = []
        self._handle: TextIO | None = None
        if append and target.is_file():
            with target.open(newline="") as handle:
                reader = csv.DictReader(handle)
                self.fields = list(reader.fieldnames or [])
                rows = list(reader)
            if keep_until_step is not None:
                kept = [row for row in rows if _step_of(row) <= keep_until_step]
                if len(kept) < len(rows):
                    self._rewrite(kept)
        elif target.exists():
            target.unlink()

    def log(self, metrics: Mapping[str, object], step: int | None = None) -> None:
        row = {key: _cell(value) for key, value in metrics.items()}
        if GLOBAL_STEP_KEY not in row and step is not None:
            row = {GLOBAL_STEP_KEY: int(step), **row}
        new = [key for key in row if key not in self.fields]
        if new:
            self._widen(new)
        handle = self._open()
        csv.DictWriter(handle, fieldnames=self.fields).writerow(row)
        handle.flush()

    def _open(self) -> TextIO:
        if self._handle is None:
            exists = self.path.is_file() and self.path.stat().st_size > 0
            self._handle = self.path.open("a", newline="")
            if not exists:
                csv.DictWriter(self._handle, fieldnames=self.fields).writeheader()
        return self._handle

    def _widen(self, new_fields: list[str]) -> None:
        self.close()
        rows: list[dict[str, str]] = []
        if self.path.is_file():
            with self.path.open(newline="") as handle:
                rows = list(csv.DictReader(handle))
        self.fields = [*self.fields, *new_fields]
        if GLOBAL_STEP_KEY in new_fields:  # keep the x-axis as the first column
            self.fields.remove(GLOBAL_STEP_KEY)
            self.fields.insert(0, GLOBAL_STEP_KEY)
        if not rows:
            if self.path.exists():
                self.path.unlink()
            return
        self._rewrite(rows)

    def _rewrite(self, rows: list[dict[str, str]]) -> None:
        """Replace the file, atomically, by the header and ``rows``."""
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".metrics-", suffix=".csv")
        try:
            with os.fdopen(fd, "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=self.fields)
                writer.writeheader()
                writer.writerows(rows)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _step_of(row: Mapping[str, str]) -> float:
    """A row's global step (rows without one are kept: they sort first)."""
    try:
        return float(row.get(GLOBAL_STEP_KEY) or "-inf")
    except ValueError:
        return float("-inf")
