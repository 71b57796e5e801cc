"""Facts about environments that the manifest checks and the environment builders both read."""

from __future__ import annotations

import os
from pathlib import PurePath

#: Module path prefixes of PettingZoo environments that moved -> where they live now
#: (MPE left PettingZoo for the ``mpe2`` package). Builders map an old path to the new one
#: with a one-line notice; checks check the new path.
MOVED_MODULES: dict[str, str] = {"pettingzoo.mpe.": "mpe2."}


def moved_module(dotted: str) -> str | None:
    """The current path of a module that moved (``pettingzoo.mpe.X`` -> ``mpe2.X``), else None."""
    for old, new in MOVED_MODULES.items():
        if dotted.startswith(old):
            return new + dotted[len(old):]
    return None


LLM_DATASET_FORMATS: dict[str, str] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "json",
    ".json": "json",
    ".csv": "csv",
}
"""Local file suffix of an LLM ``environment.dataset`` -> the ``datasets`` builder reading it."""


BANDIT_TABLE_SUFFIXES: tuple[str, ...] = (".csv", ".parquet", ".pq", ".h5", ".hdf5")
"""File suffixes (in any case) a bandit ``features``/``targets`` table can be read from."""


def unsupported_table_file(path: str | os.PathLike[str]) -> str | None:
    """Why a bandit table file cannot be read, judged by its suffix; None when it can.
    The manifest checks report it where the file is named, the builder raises it."""
    path = PurePath(path)
    suffix = path.suffix.lower()
    if suffix in BANDIT_TABLE_SUFFIXES:
        return None
    return (f"Unsupported file type '{suffix or path.name}' for '{path}': use one of "
            f"{', '.join(BANDIT_TABLE_SUFFIXES)}.")
