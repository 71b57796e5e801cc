"""Saving downloaded files (checkpoints, metrics) without ever overwriting one.

The server may suggest a file name (``Content-Disposition``); only its last path
component is used, so a server can never write outside the chosen folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import httpx

from agilerl.arena.errors import ArenaAPIError

__all__ = ["ArchiveSummary", "archive_summary", "check_new_file", "target_path", "write_new_file"]


class ArchiveSummary(TypedDict, total=False):
    """What :func:`archive_summary` tells of a downloaded checkpoint archive (it gives every
    key; an empty one stands for an archive nothing is known of)."""

    checkpoint: str | None
    pop_size: int | None
    elite_member: int | None

#: A checkpoint folder's index (``agilerl.checkpoint.layout.INDEX_NAME``; that package
#: imports torch, which the Arena client does not need).
_INDEX_NAME = "index.json"
_MAX_INDEX_BYTES = 16 << 20

_DISPOSITION_NAME = re.compile(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)\"?", re.IGNORECASE)


def target_path(
    output_path: str | os.PathLike[str] | None, disposition: str | None, fallback: str
) -> Path:
    """Where a download goes; a server-given name is reduced to a bare file name."""
    if output_path is not None and not Path(output_path).is_dir():
        return Path(output_path)
    name = fallback
    match = _DISPOSITION_NAME.search(disposition or "")
    if match:
        # Never let the server choose a folder: keep only the last path component.
        candidate = Path(match.group(1).replace("\\", "/")).name
        if candidate not in ("", ".", ".."):
            name = candidate
    return Path(output_path or ".") / name


def check_new_file(path: Path) -> None:
    if path.exists():
        raise FileExistsError(
            f"Cannot write to {path}: it already exists. Remove it or choose another path."
        )
    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(f"Cannot write to {path}: {path.parent} is not a folder.")


def write_new_file(path: Path, chunks: Iterator[bytes]) -> None:
    """Write to a temp file beside *path*, then link it into place (never overwriting)."""
    check_new_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    try:
        with open(tmp, "xb") as handle:
            for chunk in chunks:
                handle.write(chunk)
        _link_new(tmp, path)
    except FileExistsError:
        raise FileExistsError(f"Cannot write to {path}: it already exists.") from None
    except httpx.HTTPError as exc:
        raise ArenaAPIError(f"Download interrupted: {type(exc).__name__}: {exc}", 0) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _link_new(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)  # fails if path appeared meanwhile, unlike os.replace
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        check_new_file(path)
        os.replace(tmp, path)


def archive_summary(path: str | os.PathLike[str]) -> ArchiveSummary | None:
    """``{"checkpoint", "pop_size", "elite_member"}`` of the checkpoint packed in ``path``
    (``elite_member`` None when the trainer had not chosen one yet); None when ``path``
    holds no readable agilerl checkpoint index."""
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for member in tar:
                if member.isfile() and Path(member.name).name == _INDEX_NAME \
                        and len(Path(member.name).parts) <= 2 \
                        and member.size <= _MAX_INDEX_BYTES:
                    handle = tar.extractfile(member)
                    index = json.loads(handle.read()) if handle is not None else None
                    return _summary(Path(member.name).parent.name, index)
    except (OSError, tarfile.TarError, ValueError, EOFError):
        return None
    return None


def _summary(folder: str, index: object) -> ArchiveSummary | None:
    if not isinstance(index, dict) or not isinstance(index.get("summary", {}), dict):
        return None
    elite = index.get("summary", {}).get("elite_member")
    pop_size = index.get("pop_size")
    return {"checkpoint": folder or None,
            "pop_size": pop_size if isinstance(pop_size, int) else None,
            "elite_member": elite if isinstance(elite, int) and not isinstance(elite, bool)
            else None}
