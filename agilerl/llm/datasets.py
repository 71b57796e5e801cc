"""Datasets of the LLM environments (``environment.dataset``) through the ``datasets`` library.

``environment.dataset`` is one of:

* a local file -- ``.parquet``/``.pq``, ``.jsonl``, ``.json`` or ``.csv`` -- looked up
  relative to the manifest's folder, then the working directory;
* a local folder: one written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``, or
  a folder of data files that ``datasets.load_dataset`` reads;
* a Hugging Face Hub dataset id. It loads when the Hub is reachable or the dataset is in the
  local ``datasets`` cache; otherwise :class:`DatasetSourceError` says that nothing can be
  downloaded and how to point ``environment.dataset`` at a local file.

The ``train`` split (or the only split) is used; ``environment.columns`` renames columns,
each environment checks the columns it needs (:func:`require_columns`), and
``environment.train_test_split`` divides the rows into a training and a held-out set after a
shuffle seeded by the run's seed (:func:`split_dataset`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from agilerl.core.environment_facts import LLM_DATASET_FORMATS
from agilerl.core.errors import EnvironmentSetupError, MissingExtraError

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict

__all__ = [
    "FILE_FORMATS",
    "DatasetSourceError",
    "DatasetSplit",
    "hub_reachable",
    "load_dataset_source",
    "load_llm_dataset",
    "rename_columns",
    "require_columns",
    "split_dataset",
]

FILE_FORMATS = LLM_DATASET_FORMATS
"""Local file suffix -> the ``datasets`` builder that reads it."""

_HUB_PROBE_TIMEOUT_S = 3.0


class DatasetSourceError(EnvironmentSetupError):
    """``environment.dataset`` cannot be read, or lacks a column its environment needs."""


@dataclass(frozen=True)
class DatasetSplit:
    """The training and held-out rows of one dataset, and where they came from."""

    train: Dataset
    """``datasets.Dataset`` of training rows."""
    test: Dataset
    """``datasets.Dataset`` of held-out rows (evaluation)."""
    source: str
    """The file, folder or hub id the rows were read from (used in error messages)."""


def _datasets() -> ModuleType:
    try:
        import datasets
    except ImportError as exc:
        raise MissingExtraError(
            "LLM datasets need the Python package 'datasets', which is not installed. "
            "Install it with: pip install 'agilerl[llm]'"
        ) from exc
    return datasets


def hub_reachable(timeout: float = _HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether the Hugging Face Hub endpoint answers a TCP connection within ``timeout``
    seconds (False at once when ``HF_HUB_OFFLINE`` is set)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _offline_hub() -> Iterator[None]:
    """Hub look-ups answered from the local cache only (no retries against a dead network)."""
    import datasets.config
    from huggingface_hub import constants

    saved = (datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No ``datasets`` progress bars while a dataset is read (the training display is ours)."""
    datasets = _datasets()
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _find_local(value: str, base_dir: str | os.PathLike[str] | None) -> Path | None:
    candidate = Path(os.path.expanduser(value))
    if candidate.is_absolute():
        return candidate if candidate.exists() else None
    roots = [Path(base_dir)] if base_dir is not None else []
    for root in [*roots, Path.cwd()]:
        if (root / candidate).exists():
            return root / candidate
    return None


def _first_split(loaded: Dataset | DatasetDict, source: str) -> Dataset:
    """The ``train`` split of a ``DatasetDict`` (or its only split); a ``Dataset`` as is."""
    if not isinstance(loaded, Mapping):
        return loaded
    if "train" in loaded:
        return loaded["train"]
    if len(loaded) == 1:
        return next(iter(loaded.values()))
    raise DatasetSourceError(
        f"environment.dataset '{source}' has splits {sorted(loaded)} but no 'train' split; "
        f"save the training rows as the 'train' split or as a single file"
    )


def _load_file(path: Path) -> Dataset:
    builder = FILE_FORMATS.get(path.suffix.lower())
    if builder is None:
        raise DatasetSourceError(
            f"environment.dataset '{path}': unsupported file type '{path.suffix or path.name}'; "
            f"use one of {', '.join(FILE_FORMATS)} or a dataset folder"
        )
    try:
        return _datasets().load_dataset(builder, data_files=str(path), split="train")
    except DatasetSourceError:
        raise
    except Exception as exc:  # a malformed file: say which one, whatever the parser raised
        raise DatasetSourceError(
            f"environment.dataset '{path}' could not be read as {builder}: {exc}"
        ) from exc


def _load_folder(path: Path) -> Dataset:
    datasets = _datasets()
    saved = any((path / name).is_file()
                for name in ("dataset_dict.json", "state.json", "dataset_info.json"))
    try:
        loaded = datasets.load_from_disk(str(path)) if saved else \
            datasets.load_dataset(str(path))
    except Exception as exc:
        raise DatasetSourceError(
            f"environment.dataset '{path}' is a folder that could not be read as a dataset "
            f"(one written by save_to_disk, or data files {', '.join(FILE_FORMATS)}): {exc}"
        ) from exc
    return _first_split(loaded, str(path))


def _load_hub(dataset_id: str, looked_in: Sequence[Path]) -> Dataset:
    datasets = _datasets()
    online = hub_reachable()
    try:
        with contextlib.nullcontext() if online else _offline_hub():
            loaded = datasets.load_dataset(dataset_id)
    except Exception as exc:
        where = " or ".join(str(p) for p in looked_in)
        if online:
            reason = f"it could not be loaded from the Hugging Face Hub: {exc}"
        else:
            reason = ("the Hugging Face Hub is not reachable from this machine and the dataset "
                      "is not in the local datasets cache, so nothing can be downloaded")
        raise DatasetSourceError(
            f"environment.dataset '{dataset_id}' is not a local file or folder (looked in "
            f"{where}) and {reason}. Point environment.dataset at a local "
            f"{'/'.join(FILE_FORMATS)} file or a dataset folder with the same columns, "
            f"e.g. on the command line: environment.dataset=data/train.parquet"
        ) from exc
    return _first_split(loaded, dataset_id)


def load_dataset_source(value: str, base_dir: str | os.PathLike[str] | None = None
                        ) -> Dataset:
    """The rows named by ``environment.dataset`` as a ``datasets.Dataset`` (see the module
    docstring for what ``value`` may be). Raises :class:`DatasetSourceError`."""
    local = _find_local(value, base_dir)
    if local is not None:
        with _quiet():
            return _load_folder(local) if local.is_dir() else _load_file(local)
    looked_in = list(dict.fromkeys([*([Path(base_dir)] if base_dir is not None else []),
                                    Path.cwd()]))
    if Path(value).suffix.lower() in FILE_FORMATS or value.startswith((".", "/", "~")):
        raise DatasetSourceError(
            f"environment.dataset: file '{value}' not found (looked in "
            f"{' or '.join(map(str, looked_in))})"
        )
    with _quiet():
        return _load_hub(value, looked_in)


def rename_columns(dataset: Dataset, columns: Mapping[str, str] | None, source: str
                   ) -> Dataset:
    """``dataset`` with ``environment.columns`` renames (old name -> new name) applied."""
    if not columns:
        return dataset
    missing = [old for old in columns if old not in dataset.column_names]
    if missing:
        raise DatasetSourceError(
            f"environment.columns renames column '{missing[0]}', which dataset '{source}' "
            f"does not have (its columns: {', '.join(dataset.column_names)})"
        )
    renames = {old: new for old, new in columns.items() if old != new}
    return dataset.rename_columns(renames) if renames else dataset


def require_columns(dataset: Dataset, required: Sequence[str], source: str, needed_by: str) -> None:
    """Raise :class:`DatasetSourceError` naming the first column of ``required`` that
    ``dataset`` (read from ``source``) lacks; ``needed_by`` says who needs it."""
    for column in required:
        if column not in dataset.column_names:
            raise DatasetSourceError(
                f"dataset '{source}' has no column '{column}', which {needed_by} needs "
                f"(its columns: {', '.join(dataset.column_names) or 'none'}); rename a "
                f"column with environment.columns: {{<its name>: {column}}}"
            )


def split_dataset(dataset: Dataset, train_fraction: float, seed: int | None,
                  source: str = "dataset") -> tuple[Dataset, Dataset]:
    """(train, held-out) rows: a shuffle seeded by ``seed`` (0 when None), then the first
    ``round(train_fraction * len)`` rows train. Both parts must hold at least one row."""
    rows = len(dataset)
    n_train = int(round(train_fraction * rows))
    if n_train < 1 or n_train >= rows:
        raise DatasetSourceError(
            f"environment.train_test_split = {train_fraction} leaves "
            f"{'no training' if n_train < 1 else 'no held-out'} rows of the {rows} in "
            f"dataset '{source}'; both parts need at least one row"
        )
    shuffled = dataset.shuffle(seed=0 if seed is None else int(seed))
    return shuffled.select(range(n_train)), shuffled.select(range(n_train, rows))


def load_llm_dataset(spec: object, required: Sequence[str], needed_by: str,
                     base_dir: str | os.PathLike[str] | None = None,
                     seed: int | None = None) -> DatasetSplit:
    """Load ``spec.dataset`` (an ``LLMEnvSpec`` or anything with ``dataset``, ``columns``,
    ``train_test_split`` and ``seed``), apply its column renames, check ``required`` columns
    and split it. ``seed`` overrides ``spec.seed``."""
    source = getattr(spec, "dataset", None)
    if not source:
        raise DatasetSourceError(f"environment.dataset is required for {needed_by}")
    dataset = load_dataset_source(str(source), base_dir)
    dataset = rename_columns(dataset, getattr(spec, "columns", None), str(source))
    require_columns(dataset, required, str(source), needed_by)
    fraction = float(getattr(spec, "train_test_split", 0.9))
    train, test = split_dataset(dataset, fraction,
                                seed if seed is not None else getattr(spec, "seed", None),
                                str(source))
    return DatasetSplit(train=train, test=test, source=str(source))
