"""Walk an uploaded tar's raw 512-byte header blocks before :mod:`tarfile` reads it.

:mod:`tarfile` trusts the sizes an archive declares: it reads a PAX or GNU long-name
header whole into memory (a 1 MB ``.tar.gz`` can declare a 1 GB header), follows chains
of extended headers by recursion, and lets a global PAX header change the size of every
later member. So the decompressed stream is first walked here, block by block and
forward only, holding at most one extended header in memory; it is refused when

* it decompresses to more than :attr:`ArchiveLimits.max_stream_bytes`;
* an extended header (PAX ``x``/``g``/``X``, GNU ``L``/``K``) is larger than
  :attr:`ArchiveLimits.max_header_bytes`, or more than :data:`MAX_EXTENDED_RUN` follow
  one another;
* it has more than ``max_members`` members, or its regular files declare more than
  ``max_unpacked_bytes`` bytes together (before anything is extracted);
* a header is malformed (bad checksum, a size that is not plain octal digits, a PAX
  record that does not parse) or is of a kind :mod:`tarfile` would size differently
  (sparse files, a global ``size``, data declared for a folder or a link).

Everything this walk accepts, :mod:`tarfile` reads the same way, within the same bounds.
Only plain tar and gzip (``.tar.gz``) are read.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from agilerl.arena.server.errors import ApiError

BLOCK = 512
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 16
#: gzip streams one upload may concatenate (``gzip`` writes one; each costs a restart).
MAX_GZIP_MEMBERS = 16
#: extended headers that may precede one member (e.g. a global PAX header, a GNU long
#: name and a PAX header); real archives use one or two.
MAX_EXTENDED_RUN = 3
_PAX = frozenset(b"xgX")
_GNU_LONG = frozenset(b"LK")
_REGULAR = frozenset(b"07\0")
#: folders, links, devices and FIFOs: tarfile reads no data after their header.
_NO_DATA = frozenset(b"123456")


@dataclass(frozen=True)
class ArchiveLimits:
    """What one uploaded archive may hold."""

    max_members: int = 2000
    max_unpacked_bytes: int = 64 << 20
    #: largest PAX or GNU long-name header (a long path needs a few KB at most).
    max_header_bytes: int = 16 << 10

    @property
    def max_stream_bytes(self) -> int:
        """Most bytes the decompressed tar may have up to its end: the files' data plus,
        per member, a header, its padding and one extended header of each kind."""
        per_member = 2 * BLOCK + MAX_EXTENDED_RUN * (BLOCK + self.max_header_bytes)
        return self.max_unpacked_bytes + self.max_members * per_member + 2 * BLOCK


def refused(message: str, member: str | None = None) -> ApiError:
    """422 ``ARCHIVE_REFUSED`` (naming ``member`` when there is one)."""
    extras = {"member": member} if member is not None else {}
    return ApiError(422, "ARCHIVE_REFUSED", message, **extras)


def not_an_archive(detail: str) -> ApiError:
    return ApiError(422, "INVALID_ARCHIVE",
                    f"The 'file' part is not a tar or .tar.gz archive: {detail}")


def corrupt(detail: str) -> ApiError:
    return ApiError(422, "INVALID_ARCHIVE", f"The archive is corrupt: {detail}")


def is_gzip(data: bytes) -> bool:
    return data[:2] == _GZIP_MAGIC


class _Stream:
    """The upload's tar bytes (gunzipped when it is gzip), read forward, at most ``cap``.

    Compressed input is fed in small pieces, so that no step copies the whole upload.
    """

    def __init__(self, data: bytes, cap: int) -> None:
        self._gzip = is_gzip(data)
        self._data = data
        self._pos = 0
        self._tail = b""
        self._inflate: zlib._Decompress | None = zlib.decompressobj(wbits=31) if self._gzip else None
        self._buf = bytearray()
        self._members = 1
        self.consumed = 0
        self._cap = cap

    def _next_input(self) -> bytes:
        piece = self._data[self._pos:self._pos + _CHUNK]
        self._pos += len(piece)
        return piece

    def _next_member(self) -> bool:
        """After one gzip member: start the next, as GzipFile does (zero padding between
        members is skipped). False at the end of the input."""
        assert self._inflate is not None  # called only while a member is inflated
        self._tail = self._inflate.unused_data.lstrip(b"\0")
        while not self._tail and self._pos < len(self._data):
            self._tail = self._next_input().lstrip(b"\0")
        if not self._tail:
            self._inflate = None
            return False
        self._members += 1
        if self._members > MAX_GZIP_MEMBERS:
            raise refused(f"The archive is made of more than {MAX_GZIP_MEMBERS} gzip streams")
        self._inflate = zlib.decompressobj(wbits=31)
        return True

    def _fill(self, want: int) -> None:
        """Decompress until ``want`` bytes are buffered or the input ends."""
        while len(self._buf) < want and self._inflate is not None:
            if self._inflate.eof and not self._next_member():
                return
            if not self._tail:
                self._tail = self._next_input()
                if not self._tail:
                    return  # truncated: the caller sees a short read
            try:
                out = self._inflate.decompress(self._tail, max(want - len(self._buf), _CHUNK))
            except zlib.error as exc:
                raise corrupt(f"gzip: {exc}") from None
            self._tail = self._inflate.unconsumed_tail
            self._buf += out

    def read(self, size: int) -> bytes:
        """``size`` bytes, fewer only at the end of the stream."""
        if self.consumed + size > self._cap:
            raise refused(f"The archive decompresses to more than {self._cap:,} bytes")
        if self._gzip:
            self._fill(size)
            out = bytes(self._buf[:size])
            del self._buf[:size]
        else:
            out = self._data[self._pos:self._pos + size]
            self._pos += len(out)
        self.consumed += len(out)
        return out

    def skip(self, size: int) -> bool:
        """Pass over ``size`` bytes; False when the stream ends first."""
        while size > 0:
            got = len(self.read(min(size, _CHUNK)))
            if got == 0:
                return False
            size -= got
        return True


def _number(field: bytes, what: str, where: str) -> int:
    """An octal header field as tarfile reads it, refused unless it is plain digits."""
    text = field.split(b"\0", 1)[0].strip()
    if not text:
        return 0
    if not all(48 <= c <= 55 for c in text):
        raise corrupt(f"{where}: its {what} field is not an octal number")
    return int(text, 8)


def _checksum_ok(block: bytes, where: str) -> bool:
    stored = _number(block[148:156], "checksum", where)
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    signed = unsigned - sum(256 for b in (*block[:148], *block[156:]) if b > 127)
    return stored in (unsigned, signed)


def _pax_records(buf: bytes, size: int, where: str) -> dict[str, str]:
    """The ``"%d key=value\\n"`` records of a PAX header; the padding must be zeros."""
    records: dict[str, str] = {}
    pos = 0
    while pos < size:
        space = buf.find(b" ", pos, pos + 20)
        digits = buf[pos:space] if space > pos else b""
        if not digits.isdigit() or int(digits) <= space - pos + 1:
            raise corrupt(f"{where}: a PAX record does not start with its length")
        end = pos + int(digits)
        record = buf[space + 1:end]
        if end > size or not record.endswith(b"\n") or b"=" not in record:
            raise corrupt(f"{where}: a PAX record is cut short or malformed")
        key, _, value = record[:-1].partition(b"=")
        records[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        pos = end
    if buf[size:].strip(b"\0"):
        raise corrupt(f"{where}: data after the PAX records")
    return records


@dataclass
class _Walk:
    limits: ArchiveLimits
    members: int = 0
    declared: int = 0
    run: int = 0
    size_override: int | None = None
    name: str = ""


def _member_name(block: bytes, walk: _Walk) -> str:
    """The member's name for messages: the long name from a header before it, if any."""
    if walk.name:
        return walk.name
    raw = block[:100].split(b"\0", 1)[0]
    if block[345] != 0:
        raw = block[345:500].split(b"\0", 1)[0] + b"/" + raw
    return raw.decode("utf-8", "replace")


def _extended(stream: _Stream, block: bytes, size: int, walk: _Walk, where: str) -> None:
    """Read one PAX or GNU long-name header (bounded) and note what it changes."""
    kind = block[156]
    limit = walk.limits.max_header_bytes
    if size > limit:
        raise refused(f"{where} has an extended (PAX or GNU long-name) header of {size:,}"
                      f" bytes; at most {limit:,} are accepted")
    walk.run += 1
    if walk.run > MAX_EXTENDED_RUN:
        raise refused(f"{where} follows more than {MAX_EXTENDED_RUN} extended headers in a row")
    padded = -(-size // BLOCK) * BLOCK
    buf = stream.read(padded)
    if len(buf) < padded:
        raise corrupt(f"{where}: the archive ends inside an extended header")
    if kind in _GNU_LONG:
        if kind == ord("L"):
            walk.name = buf[:size].split(b"\0", 1)[0].decode("utf-8", "replace")
        return
    records = _pax_records(buf, size, where)
    if any(key.startswith("GNU.sparse") for key in records):
        raise refused(f"{where} is a sparse file; only regular files and folders are accepted")
    if "path" in records:
        walk.name = records["path"]
    if "size" in records:
        if kind == ord("g") or not records["size"].isdigit():
            raise corrupt(f"{where}: a PAX header sets 'size' to '{records['size'][:40]}'")
        walk.size_override = int(records["size"])


def _member(stream: _Stream, block: bytes, size: int, walk: _Walk) -> None:
    """Account for one member (its header read) and pass over its data."""
    kind, name = block[156], _member_name(block, walk)
    size = walk.size_override if walk.size_override is not None else size
    walk.members += 1
    walk.run, walk.size_override, walk.name = 0, None, ""
    if walk.members > walk.limits.max_members:
        raise refused(f"The archive has more than {walk.limits.max_members} members")
    # tarfile reads an old-style (V7) member whose name ends in "/" as a folder
    v7_folder = kind == 0 and block[:100].split(b"\0", 1)[0].endswith(b"/")
    if kind in _NO_DATA or v7_folder:
        if size:
            raise refused(f"Archive member '{name}' is not a regular file but declares"
                          f" {size:,} bytes of data", name)
        return
    if kind not in _REGULAR:
        raise refused(f"Archive member '{name}' is of tar type {chr(kind)!r}; only regular"
                      " files and folders are accepted", name)
    walk.declared += size
    if walk.declared > walk.limits.max_unpacked_bytes:
        raise refused(f"The archive unpacks to more than {walk.limits.max_unpacked_bytes:,}"
                      " bytes", name)
    if not stream.skip(-(-size // BLOCK) * BLOCK):
        raise corrupt(f"the archive ends inside member '{name}'")


def prescan(data: bytes, limits: ArchiveLimits) -> None:
    """Refuse ``data`` (a tar or .tar.gz) unless :mod:`tarfile` can read it within
    ``limits`` (module docstring).

    :raises ApiError: 422 ``ARCHIVE_REFUSED`` or ``INVALID_ARCHIVE``.
    """
    stream = _Stream(data, limits.max_stream_bytes)
    walk = _Walk(limits)
    while True:
        block = stream.read(BLOCK)
        where = f"Archive member {walk.members + 1}"
        if not block or block == bytes(BLOCK):
            break  # end of the archive: tarfile stops reading here too
        if len(block) < BLOCK or not _checksum_ok(block, where):
            if stream.consumed <= BLOCK:
                raise not_an_archive("no valid tar header at its start")
            raise corrupt(f"{where}: truncated header or bad header checksum")
        if block[124] & 0x80:
            raise refused(f"{where} declares a size in binary (over 8 GiB)")
        size = _number(block[124:136], "size", where)
        if block[156] in _PAX or block[156] in _GNU_LONG:
            _extended(stream, block, size, walk, where)
        else:
            _member(stream, block, size, walk)
    if walk.run:
        raise corrupt("the archive ends after an extended header")
