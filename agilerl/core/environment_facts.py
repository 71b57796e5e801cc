"""Facts about environments that the manifest checks and the environment builders both read."""

from __future__ import annotations

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
