"""Checkpoint archives: a checkpoint folder packed as ``.tar.gz`` (what an Arena download
is), unpacked to a temporary folder to load from (:func:`unpacked_checkpoint`).

Archives come from elsewhere: only regular files and folders are unpacked (tarfile's
``data`` filter refuses links, devices and paths leaving the folder). Which member an
archive's elite is can be read without torch: :func:`agilerl.arena.download.archive_summary`.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from agilerl.checkpoint.folder import CheckpointError, find_checkpoint
from agilerl.checkpoint.layout import INDEX_NAME

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


def is_archive(path: str | os.PathLike[str]) -> bool:
    """A file named like a checkpoint archive."""
    return Path(path).name.endswith(ARCHIVE_SUFFIXES) and Path(path).is_file()


@contextlib.contextmanager
def unpacked_checkpoint(path: str | os.PathLike[str]) -> Iterator[Path]:
    """The checkpoint folder packed in ``path``, unpacked to a temporary folder that is
    removed afterwards (:class:`CheckpointError` when it holds no checkpoint)."""
    with tempfile.TemporaryDirectory(prefix="agilerl-checkpoint-") as folder:
        try:
            with tarfile.open(path, mode="r:gz") as tar:
                tar.extractall(folder, filter="data")
        except (OSError, tarfile.TarError, EOFError) as exc:
            raise CheckpointError(f"{path} is not a readable checkpoint archive "
                                  f"({type(exc).__name__}: {exc})") from None
        found = [p.parent for p in Path(folder).glob(f"*/{INDEX_NAME}")]
        if (Path(folder) / INDEX_NAME).is_file():
            found.append(Path(folder))
        if len(found) != 1:
            raise CheckpointError(f"{path} holds {len(found) or 'no'} checkpoint folders "
                                  "(expected one, as an Arena download holds)")
        yield find_checkpoint(found[0]).path
