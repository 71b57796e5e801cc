"""Contextual-bandit environments from a ``BanditEnvSpec``.

Dataset mode: a feature table and a target table (in-memory tables, or ``.csv``,
``.parquet``/``.pq``, ``.h5``/``.hdf5`` files; CSV is read with the standard library,
Parquet by pandas and pyarrow from the ``bandit`` extra). Each target value is an arm. A
context is one sample's features in the disjoint per-arm layout: an ``(arms, arms * n_features)`` float32 matrix whose row ``a`` holds the
features in block ``a`` and zeros elsewhere, so one network scores every arm. Pulling the
arm equal to the sample's target earns 1, any other arm 0; each step draws a new sample.

Entrypoint mode: ``constructor(**config)`` resolved like every entrypoint
(:func:`agilerl.envs.resolve_entrypoint`, relative to ``path``).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from agilerl.core.environment_facts import BANDIT_TABLE_SUFFIXES as TABLE_SUFFIXES
from agilerl.core.environment_facts import unsupported_table_file
from agilerl.envs.entrypoint import resolve_entrypoint
from agilerl.input_files import file_problem

__all__ = ["TABLE_SUFFIXES", "BanditEnv", "load_table", "make_bandit_env"]


def load_table(source: object) -> object:
    """A table as given (DataFrame, Series, array), or read from a file path by suffix."""
    if not isinstance(source, str | os.PathLike):
        return source
    path = Path(source)
    unsupported = unsupported_table_file(path)
    if unsupported is not None:
        raise ValueError(unsupported)
    suffix = path.suffix.lower()
    problem = file_problem(path)
    if problem is not None:
        raise FileNotFoundError(f"Bandit data file '{path}' {problem}.")
    if suffix == ".csv":
        return read_csv(path)
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError(
            "Reading bandit tables needs pandas: pip install 'agilerl[bandit]'"
        ) from exc
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(path)
    return _read_hdf(path)


def read_csv(path: Path) -> np.ndarray:
    """A CSV table with a header row, as an array: float when every value is a number, else
    strings (target labels). Read with the standard library, so CSV tables need neither
    pandas nor its memory (about 80 MB once imported)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    widths = {len(row) for row in body}
    if len(widths) > 1 or (widths and widths != {len(header)}):
        raise ValueError(f"'{path}': every row needs {len(header)} values (one per header "
                         f"column), found rows of {sorted(widths)}")
    table = np.array(body, dtype=str).reshape(len(body), len(header))
    try:  # an empty cell is a missing number (NaN), as pandas reads it
        return np.where(np.char.strip(table) == "", "nan", table).astype(np.float64)
    except ValueError:
        return table


def _read_hdf(path: Path) -> np.ndarray:
    """First dataset of an HDF5 file (h5py; pandas' own reader needs PyTables)."""
    try:
        import h5py
    except ImportError as exc:
        raise ImportError("Reading .h5 tables needs h5py: pip install 'agilerl[offline]'") from exc
    with h5py.File(path, "r") as handle:
        names: list[str] = []
        handle.visit(
            lambda name: names.append(name) if isinstance(handle[name], h5py.Dataset) else None
        )
        if not names:
            raise ValueError(f"HDF5 file '{path}' holds no dataset.")
        return np.asarray(handle[names[0]])


def _as_array(table: object) -> np.ndarray:
    to_numpy = getattr(table, "to_numpy", None)
    return np.asarray(to_numpy() if callable(to_numpy) else table)


class BanditEnv:
    """Dataset-backed contextual bandit (see the module docs for the context layout)."""

    num_envs = 1

    def __init__(self, features: object, targets: object, seed: int | None = None):
        try:
            x = _as_array(features).astype(np.float32)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"features: every column must be numeric ({exc})") from None
        if x.ndim == 1:
            x = x[:, None]
        if len(x) == 0:
            raise ValueError("features: the table is empty.")
        if not np.isfinite(x).all():
            row = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
            raise ValueError(f"features: row {row} holds NaN or infinite values.")
        y = _as_array(targets)
        if len(y) != len(x):
            raise ValueError(f"targets has {len(y)} rows, features has {len(x)}.")
        y = y.reshape(len(x), -1)
        if y.shape[1] != 1:
            raise ValueError(f"targets: one column is needed (the arm), got {y.shape[1]}.")
        self.arm_labels, labels = np.unique(y[:, 0], return_inverse=True)
        self.features = x
        self.labels = labels.astype(np.int64)
        self.arms = len(self.arm_labels)
        self.n_features = x.shape[1]
        self.context_dim = self.n_features * self.arms
        low, high = float(x.min()), float(x.max())
        self.single_observation_space = spaces.Box(
            low=min(low, 0.0), high=max(high, 0.0), shape=(self.context_dim,), dtype=np.float32
        )
        self.single_action_space = spaces.Discrete(self.arms)
        self.observation_space = self.single_observation_space
        self.action_space = self.single_action_space
        self._rng = np.random.default_rng(seed)
        self._target = 0

    def _draw(self) -> np.ndarray:
        index = int(self._rng.integers(len(self.features)))
        self._target = int(self.labels[index])
        context = np.zeros((self.arms, self.context_dim), dtype=np.float32)
        for arm in range(self.arms):
            start = arm * self.n_features
            context[arm, start : start + self.n_features] = self.features[index]
        return context

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start (optionally reseeding) and return the first context."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        return self._draw()

    def step(self, action: npt.ArrayLike) -> tuple[np.ndarray, float]:
        """Pull arm ``action``; returns ``(next_context, reward)``."""
        reward = 1.0 if int(np.asarray(action).reshape(-1)[0]) == self._target else 0.0
        return self._draw(), reward

    def close(self) -> None:
        """Nothing to release (the tables live in memory); here for the env protocol."""


def _describe(source: object) -> str:
    if isinstance(source, str | os.PathLike):
        return f"'{os.fspath(source)}'"
    return f"<in-memory {type(source).__name__}>"


def make_bandit_env(spec: object, seed: int | None = None) -> object:
    """The bandit env of ``spec`` (dataset or entrypoint mode)."""
    features, targets = getattr(spec, "features", None), getattr(spec, "targets", None)
    entrypoint = getattr(spec, "entrypoint", None)
    if features is not None or targets is not None:
        if features is None or targets is None:
            raise ValueError("Both 'features' and 'targets' are required for a dataset bandit.")
        try:
            return BanditEnv(load_table(features), load_table(targets), seed=seed)
        except ValueError as exc:
            raise ValueError(f"bandit tables (features {_describe(features)}, targets "
                             f"{_describe(targets)}): {exc}") from None
    if entrypoint:
        constructor = resolve_entrypoint(entrypoint, getattr(spec, "path", None))
        return constructor(**dict(getattr(spec, "config", None) or {}))
    raise ValueError(
        "The bandit environment requires either 'features' and 'targets' or an 'entrypoint'."
    )
