"""File operations that never follow a link: the server's only way into folders that job
or upload code can write (experiment folders, an environment's ``scratch/``, datasets).

A job can replace any file of its experiment folder with a symbolic link, a FIFO or a
device node; the server runs unconfined, so following one would read or write whatever
the link names (another user's files, ``jwt_secret``, ``arena.sqlite3``), and opening a
FIFO would block a server thread for ever. Every operation here therefore

* starts from a *trusted root* (a folder the server made and the job cannot replace, e.g.
  ``experiments/<id>``) and walks the relative path one component at a time with
  ``openat(dir_fd, name, O_NOFOLLOW)``, so no component may be a link;
* opens files with ``O_NONBLOCK`` and ``fstat``\\ s the descriptor before reading, so only
  regular files are read (a FIFO or device is refused without blocking), and reads at
  most a stated number of bytes;
* writes by creating a temporary file with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in the target's
  folder and renaming it over the name (``rename`` replaces a planted link itself, never
  its target);
* lists folders with ``lstat`` semantics, reporting links and special files as such.

Refusals raise :class:`Refused` (an ``OSError``), whose message names the path but never
carries any of the file's bytes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, cast

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND_FLAGS = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                 | os.O_CLOEXEC)
#: a generous cap for the small JSON files the server reads (manifests, index.json).
SMALL_FILE = 1 << 20


class Refused(OSError):
    """A path that is a link, a special file, too large, or leaves its root."""


@dataclass(frozen=True)
class Entry:
    """One folder entry, as ``lstat`` saw it (``rel`` is relative to the walked folder)."""

    rel: str
    kind: str  # "file", "dir" or "other" (links, FIFOs, devices, sockets)
    size: int
    mtime: float


def _parts(rel: str | PurePosixPath | Path) -> list[str]:
    parts = [p for p in PurePosixPath(str(rel)).parts if p not in ("", ".")]
    if str(rel).startswith("/") or ".." in parts:
        raise Refused(errno.EINVAL, "path must stay inside its folder", str(rel))
    return parts


def _refusal(exc: OSError, where: str) -> OSError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENXIO):
        return Refused(exc.errno, "refused: a link or special file, or not a folder where"
                       " one was expected", where)
    return exc


@contextlib.contextmanager
def folder(root: Path, rel: str | PurePosixPath | Path = "", *,
           create: bool = False) -> Iterator[int]:
    """A descriptor of folder ``root/rel``, reached without following any link below
    ``root`` (``root`` itself must not be a link). ``create`` makes missing folders (0700)."""
    where = str(root)
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise _refusal(exc, where) from None
    try:
        for part in _parts(rel):
            where = f"{where}/{part}"
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise _refusal(exc, where) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _split(rel: str | PurePosixPath | Path) -> tuple[str, str]:
    parts = _parts(rel)
    if not parts:
        raise Refused(errno.EINVAL, "a file name is needed", str(rel))
    return "/".join(parts[:-1]), parts[-1]


def open_file(root: Path, rel: str | PurePosixPath | Path) -> BinaryIO:
    """``root/rel`` opened for reading, only if it is a regular file reached without links.

    :raises FileNotFoundError: it does not exist.
    :raises Refused: a link, FIFO, device, socket or folder.
    """
    return _open_regular(root, rel, _READ_FLAGS, "rb")


def read_bytes(root: Path, rel: str | PurePosixPath | Path, limit: int = SMALL_FILE) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes (:func:`open_file`)."""
    with open_file(root, rel) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise Refused(errno.EFBIG, f"larger than {limit} bytes", f"{root}/{rel}")
    return data


def write_atomic(root: Path, rel: str | PurePosixPath | Path, data: bytes, *,
                 mode: int = 0o600) -> None:
    """Replace ``root/rel`` with ``data``: a fresh temporary file renamed over the name, so
    a link planted there is replaced, never written through. Missing folders are made."""
    parent, name = _split(rel)
    with folder(root, parent, create=True) as dfd:
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise


def open_append(root: Path, rel: str | PurePosixPath | Path) -> BinaryIO:
    """``root/rel`` opened for appending (created 0600 when missing); a link, FIFO or other
    special file there is refused."""
    return _open_regular(root, rel, _APPEND_FLAGS, "ab")


def _open_regular(root: Path, rel: str | PurePosixPath | Path, flags: int,
                  mode: str) -> BinaryIO:
    """``root/rel`` opened with ``flags`` (which hold ``O_NOFOLLOW | O_NONBLOCK``, so
    neither a link nor a FIFO is followed or waited on), kept only if it is a regular file,
    and handed back blocking as a file object in ``mode``."""
    parent, name = _split(rel)
    with folder(root, parent) as dfd:
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dfd)
        except OSError as exc:
            raise _refusal(exc, f"{root}/{rel}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(errno.EINVAL, "not a regular file", f"{root}/{rel}")
        os.set_blocking(fd, True)
        return cast(BinaryIO, os.fdopen(fd, mode))
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    return "dir" if stat.S_ISDIR(mode) else "other"


def walk(root: Path, rel: str | PurePosixPath | Path = "", *, depth: int = 8,
         limit: int = 100_000) -> list[Entry]:
    """Every entry under ``root/rel`` (relative to it), links and special files reported as
    ``other`` and never entered; at most ``depth`` folders deep and ``limit`` entries.
    A missing folder, or one reached through a link, has no entries."""
    found: list[Entry] = []
    try:
        with folder(root, rel) as fd:
            _walk(fd, "", depth, limit, found)
    except (FileNotFoundError, Refused):
        return []
    return found


def _walk(fd: int, prefix: str, depth: int, limit: int, found: list[Entry]) -> None:
    with os.scandir(fd) as entries:
        for entry in entries:
            if len(found) >= limit:
                return
            info = entry.stat(follow_symlinks=False)
            name = f"{prefix}{entry.name}"
            found.append(Entry(name, _kind(info.st_mode), info.st_size, info.st_mtime))
            if stat.S_ISDIR(info.st_mode) and depth > 1:
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:  # replaced by a link since it was listed
                    continue
                try:
                    _walk(child, f"{name}/", depth - 1, limit, found)
                finally:
                    os.close(child)


def entry(root: Path, rel: str | PurePosixPath | Path) -> Entry | None:
    """``root/rel`` as ``lstat`` sees it (None: missing, or reached only through a link)."""
    parent, name = _split(rel)
    try:
        with folder(root, parent) as dfd:
            info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except (FileNotFoundError, Refused):
        return None
    return Entry(str(rel), _kind(info.st_mode), info.st_size, info.st_mtime)
