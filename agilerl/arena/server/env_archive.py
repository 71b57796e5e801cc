"""Unpack an uploaded environment archive without letting it write outside its folder.

Only regular files and folders are accepted. Every other member (symbolic and hard links,
character and block devices, FIFOs) is refused, as are absolute names, names with a
``..`` part, names or paths longer than a file system takes, a name used both as a file
and as a folder, and archives whose headers, members or unpacked size exceed the limits
(the raw headers are walked by :mod:`.tar_scan` before :mod:`tarfile` reads any). The
whole archive is checked before anything is written, and files are written by this code
(never ``TarFile.extract``), owner-only, without execute bits.
"""

from __future__ import annotations

import errno
import io
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.tar_scan import ArchiveLimits, corrupt, is_gzip, prescan, refused

__all__ = ["ArchiveLimits", "safe_name", "unpack"]

_COPY_CHUNK = 1 << 16
#: longest name of one file or folder (bytes, as most file systems allow).
MAX_NAME_BYTES = 255
#: longest member path (bytes): far below PATH_MAX once under the environment's folder.
MAX_PATH_BYTES = 1024
_SHOWN = 120


def _shown(name: str) -> str:
    """``name`` as quoted in an answer: an over-long one is cut."""
    return name if len(name) <= _SHOWN else name[:_SHOWN] + "..."


def _refuse(message: str, member: str | None = None) -> ApiError:
    return refused(message, _shown(member) if member is not None else None)


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"a symbolic link (to '{_shown(member.linkname)}')"
    if member.islnk():
        return f"a hard link (to '{_shown(member.linkname)}')"
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


def _check_name(member: tarfile.TarInfo) -> PurePosixPath:
    name = member.name
    shown = _shown(name)
    rel = safe_name(name)
    if rel is None:
        raise _refuse(f"Archive member '{shown}' would be written outside the"
                      " environment's folder (absolute path or '..')", name)
    try:
        encoded = rel.as_posix().encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse(f"Archive member '{shown}' has a name that is not UTF-8", name) from None
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise _refuse(f"Archive member '{shown}' has a control character in its name", name)
    longest = max((len(part.encode("utf-8")) for part in rel.parts), default=0)
    if longest > MAX_NAME_BYTES:
        raise _refuse(f"Archive member '{shown}' has a file or folder name of {longest}"
                      f" bytes; at most {MAX_NAME_BYTES} are accepted", name)
    if len(encoded) > MAX_PATH_BYTES:
        raise _refuse(f"Archive member '{shown}' has a path of {len(encoded)} bytes; at most"
                      f" {MAX_PATH_BYTES} are accepted", name)
    return rel


class _Layout:
    """The files and folders the archive makes, so that a name used both as a file and
    as a folder (or twice as a file) is refused before anything is written."""

    def __init__(self) -> None:
        self.files: set[PurePosixPath] = set()
        self.folders: set[PurePosixPath] = {PurePosixPath(".")}

    def add(self, member: tarfile.TarInfo, rel: PurePosixPath) -> None:
        shown = _shown(member.name)
        for parent in rel.parents:
            if parent in self.files:
                raise _refuse(f"Archive member '{shown}' is inside '{_shown(str(parent))}',"
                              " which the archive also holds as a file", member.name)
        if member.isdir():
            if rel in self.files:
                raise _refuse(f"Archive member '{shown}' is a folder and also a file",
                              member.name)
        elif rel in self.folders:
            raise _refuse(f"Archive member '{shown}' is a file and also a folder",
                          member.name)
        elif rel in self.files:
            raise _refuse(f"Archive member '{shown}' appears twice", member.name)
        (self.folders if member.isdir() else self.files).add(rel)
        self.folders.update(rel.parents)


def _members(tar: tarfile.TarFile, limits: ArchiveLimits) -> list[tuple[tarfile.TarInfo, PurePosixPath]]:
    checked: list[tuple[tarfile.TarInfo, PurePosixPath]] = []
    layout = _Layout()
    total = 0
    for member in tar:
        if len(checked) >= limits.max_members:
            raise _refuse(f"The archive has more than {limits.max_members} members")
        rel = _check_name(member)
        if not (member.isfile() or member.isdir()):
            raise _refuse(f"Archive member '{_shown(member.name)}' is {_kind(member)}; only"
                          " regular files and folders are accepted", member.name)
        layout.add(member, rel)
        total += member.size if member.isfile() else 0
        if total > limits.max_unpacked_bytes:
            raise _refuse(f"The archive unpacks to more than {limits.max_unpacked_bytes}"
                          " bytes")
        checked.append((member, rel))
    return checked


def _open(data: bytes) -> tarfile.TarFile:
    # the mode is the one the pre-scan read: tarfile's own guess could differ on a polyglot
    stream = io.BytesIO(data)
    try:
        if is_gzip(data):
            return tarfile.open(fileobj=stream, mode="r:gz")
        return tarfile.open(fileobj=stream, mode="r:")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ApiError(422, "INVALID_ARCHIVE",
                       f"The 'file' part is not a tar or .tar.gz archive: {exc}") from None


def unpack(data: bytes, dest: Path, limits: ArchiveLimits) -> list[str]:
    """Check the whole archive, then write its files under ``dest`` (created, must not
    exist). Returns the files written (POSIX paths relative to ``dest``).

    The raw headers are walked first (:func:`.tar_scan.prescan`), so :mod:`tarfile` only
    ever reads an archive whose headers, member count and sizes are within ``limits``.

    :raises ApiError: 422 ``ARCHIVE_REFUSED`` naming the offending member, or
        ``INVALID_ARCHIVE``.
    """
    prescan(data, limits)
    with _open(data) as tar:
        try:
            members = _members(tar, limits)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise corrupt(str(exc)) from None
        if not any(m.isfile() for m, _ in members):
            raise _refuse("The archive holds no files")
        dest.mkdir(mode=0o700, parents=True)
        written = []
        try:
            for member, rel in members:
                _write(tar, member, dest / rel)
                if member.isfile():
                    written.append(rel.as_posix())
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return sorted(written)


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    """Write one checked member (``_Layout`` has ruled out clashes between members)."""
    try:
        if member.isdir():
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            return
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        source = tar.extractfile(member)
        if source is None:  # pragma: no cover - isfile() members always have data
            return
        with source, open(target, "xb") as out:
            remaining = member.size
            while remaining > 0:
                chunk = source.read(min(_COPY_CHUNK, remaining))
                if not chunk:
                    break
                out.write(chunk)
                remaining -= len(chunk)
        target.chmod(0o600)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise _refuse(f"Archive member '{_shown(member.name)}' has a path too long for"
                          " this server's disk", member.name) from None
        raise ApiError(500, "STORAGE_ERROR", f"Could not write archive member"
                       f" '{_shown(member.name)}': {exc.strerror}") from None
