"""Handing back the pages of shared libraries that only loading them touched.

Loading torch reads about 90 MB of its shared libraries into this process's resident set
(relocation tables, symbol tables, static initialisers, and code that runs once), most of
which nothing touches again. Worker processes forked from this one only map the library
pages they use themselves, so a driver that starts workers would otherwise keep those
load-time pages resident alone for the whole run.

:func:`release_library_pages` unmaps them with ``madvise(MADV_DONTNEED)`` on every
read-only, file-backed mapping that holds no private (copied-on-write) page: such a range
has exactly its file's contents, so dropping it loses nothing, and a page touched again is
mapped back from the page cache (a minor fault; the file's pages stay cached). Writable
mappings and any mapping with private pages are left alone. Linux only; elsewhere, or when
``/proc`` cannot be read, it does nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

_MADV_DONTNEED = 4


def _clean_readonly_file_ranges(smaps: str) -> Iterator[tuple[int, int]]:
    """``(start, length)`` of each mapping in ``smaps`` (the text of /proc/PID/smaps) that
    maps a file read-only and has no anonymous (private, written) page."""
    start = length = 0
    eligible = False
    for line in smaps.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not fields[0].endswith(":"):  # a mapping's header: ADDR-ADDR PERMS OFF DEV INODE PATH
            if eligible:
                yield start, length
            low, _, high = fields[0].partition("-")
            start, length = int(low, 16), int(high, 16) - int(low, 16)
            perms = fields[1] if len(fields) > 1 else ""
            path = fields[5] if len(fields) > 5 else ""
            eligible = path.startswith("/") and "w" not in perms and perms.startswith("r")
        elif fields[0] == "Anonymous:" and fields[1] != "0":
            eligible = False
    if eligible:
        yield start, length


def release_library_pages() -> int:
    """Unmap the resident pages of read-only file mappings that hold no private page (see
    the module docstring); return the number of mappings released (0 where unsupported)."""
    if not sys.platform.startswith("linux"):
        return 0  # pragma: no cover - not Linux
    try:
        import ctypes

        with open("/proc/self/smaps") as fh:
            smaps = fh.read()
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):  # pragma: no cover - no /proc or no madvise
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    released = 0
    for start, length in _clean_readonly_file_ranges(smaps):
        released += madvise(start, length, _MADV_DONTNEED) == 0
    return released
