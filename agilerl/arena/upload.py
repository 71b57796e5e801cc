"""Packing local files for upload: environment sources, sidecars and reward modules."""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path
from typing import IO, TypeAlias

from agilerl.arena.errors import ArenaFileNotFoundError

__all__ = ["FilePart", "discover_sidecars", "file_part", "pack_source"]

FilePart: TypeAlias = tuple[str, bytes | IO[bytes], str]
"""A multipart file part: (filename, bytes or binary handle, content type)."""

_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


def pack_source(source: str | os.PathLike[str] | bytes) -> FilePart:
    """Turn an environment source into a gzip tar archive part.

    A folder is archived with paths relative to it (sorted, so the archive is
    reproducible); a single file is archived alone; an existing ``.tar.gz``/``.tgz``
    is sent as is; bytes are taken to be an archive already.
    """
    if isinstance(source, bytes):
        return ("environment.tar.gz", source, "application/gzip")
    path = Path(source)
    if not path.exists():
        raise ArenaFileNotFoundError(f"Source path not found: {path}")
    if path.is_file() and path.name.endswith(_ARCHIVE_SUFFIXES):
        return (path.name, path.open("rb"), "application/gzip")
    # Unnamed temp file: nothing is left behind on a crash; the caller closes it.
    handle: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
    with tarfile.open(fileobj=handle, mode="w:gz") as archive:
        if path.is_dir():
            for member in sorted(p for p in path.rglob("*") if p.is_file()):
                archive.add(member, arcname=member.relative_to(path).as_posix())
            name = f"{path.name}.tar.gz"
        else:
            archive.add(path, arcname=path.name)
            name = f"{path.stem}.tar.gz"
    handle.seek(0)
    return (name, handle, "application/gzip")


def discover_sidecars(
    source: str | os.PathLike[str] | bytes,
    requirements: str | os.PathLike[str] | None,
    env_config: str | os.PathLike[str] | None,
) -> tuple[Path | None, Path | None]:
    """Find ``requirements.txt`` and ``env_config.{yaml,yml,json}`` at the top of a folder.

    Explicit paths win; they must exist.
    """
    folder = None if isinstance(source, bytes) else Path(source)
    found_req = Path(requirements) if requirements is not None else None
    found_cfg = Path(env_config) if env_config is not None else None
    if folder is not None and folder.is_dir():
        if found_req is None and (folder / "requirements.txt").is_file():
            found_req = folder / "requirements.txt"
        if found_cfg is None:
            for name in ("env_config.yaml", "env_config.yml", "env_config.json"):
                if (folder / name).is_file():
                    found_cfg = folder / name
                    break
    for candidate in (found_req, found_cfg):
        if candidate is not None and not candidate.is_file():
            raise ArenaFileNotFoundError(f"Upload file not found: {candidate}")
    return found_req, found_cfg


def file_part(
    value: str | os.PathLike[str] | bytes, default_name: str, content_type: str
) -> FilePart:
    """A file part from a path (opened for reading) or raw bytes."""
    if isinstance(value, bytes):
        return (default_name, value, content_type)
    path = Path(value)
    if not path.is_file():
        raise ArenaFileNotFoundError(f"Upload file not found: {path}")
    return (path.name, path.open("rb"), content_type)
