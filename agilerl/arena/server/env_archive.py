"""Unpack an uploaded environment archive without letting it write outside its folder.

Only regular files and folders are accepted. Every other member (symbolic and hard links,
character and block devices, FIFOs) is refused, as are absolute names, names with a
``..`` part, and archives whose members or unpacked size exceed the limits. The whole
archive is checked before anything is written, and files are written by this code
(never ``TarFile.extract``), owner-only, without execute bits.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agilerl.arena.server.errors import ApiError

_COPY_CHUNK = 1 << 16


@dataclass(frozen=True)
class ArchiveLimits:
    max_members: int = 2000
    max_unpacked_bytes: int = 64 << 20


def _refuse(message: str, member: str | None = None) -> ApiError:
    extras = {"member": member} if member is not None else {}
    return ApiError(422, "ARCHIVE_REFUSED", message, **extras)


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link (to '{member.linkname}')"
    if member.islnk():
        return f"a hard link (to '{member.linkname}')"
    if member.ischr() or member.isblk():
        return "a device file"
    if member.isfifo():
        return "a FIFO"
    return "not a regular file or folder"


def safe_name(name: str) -> PurePosixPath | None:
    """The member's path relative to the archive root, or None when it would leave it."""
    text = name.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        return None
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or "\x00" in text:
        return None
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _members(tar: tarfile.TarFile, limits: ArchiveLimits) -> list[tuple[tarfile.TarInfo, PurePosixPath]]:
    checked: list[tuple[tarfile.TarInfo, PurePosixPath]] = []
    total = 0
    for member in tar:
        if len(checked) >= limits.max_members:
            raise _refuse(f"The archive has more than {limits.max_members} members")
        rel = safe_name(member.name)
        if rel is None:
            raise _refuse(f"Archive member '{member.name}' would be written outside the"
                          " environment's folder (absolute path or '..')", member.name)
        if not (member.isfile() or member.isdir()):
            raise _refuse(f"Archive member '{member.name}' is {_kind(member)}; only regular"
                          " files and folders are accepted", member.name)
        total += member.size if member.isfile() else 0
        if total > limits.max_unpacked_bytes:
            raise _refuse(f"The archive unpacks to more than {limits.max_unpacked_bytes}"
                          " bytes")
        checked.append((member, rel))
    return checked


def _open(data: bytes) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ApiError(422, "INVALID_ARCHIVE",
                       f"The 'file' part is not a tar or .tar.gz archive: {exc}") from None


def unpack(data: bytes, dest: Path, limits: ArchiveLimits) -> list[str]:
    """Check the whole archive, then write its files under ``dest`` (created, must not
    exist). Returns the files written (POSIX paths relative to ``dest``).

    :raises ApiError: 422 ``ARCHIVE_REFUSED`` naming the offending member, or
        ``INVALID_ARCHIVE``.
    """
    with _open(data) as tar:
        try:
            members = _members(tar, limits)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ApiError(422, "INVALID_ARCHIVE", f"The archive is corrupt: {exc}") from None
        if not any(m.isfile() for m, _ in members):
            raise _refuse("The archive holds no files")
        dest.mkdir(mode=0o700, parents=True)
        written = []
        try:
            for member, rel in members:
                target = dest / rel
                if member.isdir():
                    target.mkdir(mode=0o700, parents=True, exist_ok=True)
                    continue
                _write(tar, member, target)
                written.append(rel.as_posix())
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return sorted(written)


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if target.is_symlink() or target.is_dir():
        raise _refuse(f"Archive member '{member.name}' clashes with a folder of the same name",
                      member.name)
    source = tar.extractfile(member)
    if source is None:  # pragma: no cover - isfile() members always have data
        return
    remaining = member.size
    try:
        out = open(target, "xb")  # noqa: SIM115 - closed below with the source
    except FileExistsError:
        raise _refuse(f"Archive member '{member.name}' appears twice", member.name) from None
    with source, out:
        while remaining > 0:
            chunk = source.read(min(_COPY_CHUNK, remaining))
            if not chunk:
                break
            out.write(chunk)
            remaining -= len(chunk)
    target.chmod(0o600)
