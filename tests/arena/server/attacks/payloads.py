"""Hostile uploads, built cheaply: YAML alias bombs, tar headers written by hand, and
gzip streams that decompress to far more than they take to build."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zlib
from typing import Any

BLOCK = 512


def yaml_bomb(levels: int = 9, fan: int = 9) -> str:
    """The "billion laughs": ``fan ** levels`` strings from a few hundred bytes."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * fan)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


def yaml_wide_scalar_bomb(width: int = 1 << 16, fan: int = 10, levels: int = 4) -> str:
    """Few values, long strings: ``fan ** levels`` references to one ``width``-byte string
    (under the value-count limit, yet gigabytes once written out as JSON)."""
    lines = [f"s: &l0 {'x' * width}"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


def header(name: str, size: int, kind: bytes = b"0") -> bytes:
    """One ustar header block with a correct checksum."""
    block = bytearray(BLOCK)
    block[0:len(name)] = name.encode()
    block[100:108] = b"0000644\0"
    block[108:116] = b"0000000\0"
    block[116:124] = b"0000000\0"
    block[124:136] = b"%011o\0" % size
    block[136:148] = b"00000000000\0"
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def pax_record(key: str, value: str) -> bytes:
    body = f" {key}={value}\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def gzip_repeating(head: bytes, unit: bytes, repeat: int, tail: bytes) -> bytes:
    """gzip of ``head + unit * repeat + tail`` built in O(len(unit)) time and memory:
    the compressed ``unit`` is emitted ``repeat`` times (a full flush makes every copy
    identical) and the CRC is combined by hand."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [comp.compress(head) + comp.flush(zlib.Z_FULL_FLUSH)]
    once = comp.compress(unit) + comp.flush(zlib.Z_FULL_FLUSH)
    twice = comp.compress(unit) + comp.flush(zlib.Z_FULL_FLUSH)
    assert once == twice
    crc = zlib.crc32(head)
    for _ in range(repeat):
        crc = zlib.crc32(unit, crc)
    crc = zlib.crc32(tail, crc)
    body = [*parts, once * repeat, comp.compress(tail) + comp.flush()]
    size = (len(head) + len(unit) * repeat + len(tail)) & 0xFFFFFFFF
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + b"".join(body)
            + crc.to_bytes(4, "little") + size.to_bytes(4, "little"))


ENV_FILE = b"import gymnasium\n"


def pax_header_bomb(mib: int) -> bytes:
    """A .tar.gz whose first member has a ``mib`` MiB PAX header (one huge comment
    record, valid as far as tarfile is concerned), then an ordinary file."""
    unit = b"x" * (1 << 20)
    value_len = mib * len(unit)
    key = b" comment="
    length = next(n for d in range(1, 20)
                  if len(str(n := d + len(key) + value_len + 1)) == d)
    size = length
    head = header("././@PaxHeader", size, b"x") + str(length).encode() + key
    tail = b"\n" + bytes(-size % BLOCK) + header("env.py", len(ENV_FILE)) + padded(ENV_FILE)
    return gzip_repeating(head, unit, mib, tail + bytes(2 * BLOCK))


def pax_chain(count: int) -> bytes:
    """``count`` PAX headers in a row (tarfile follows them by recursion), then a file."""
    record = pax_record("comment", "x")
    one = header("././@PaxHeader", len(record), b"x") + padded(record)
    raw = one * count + header("env.py", len(ENV_FILE)) + padded(ENV_FILE) + bytes(2 * BLOCK)
    return zlib.compress(raw, 9, 31)


def declared_size_bomb(gib: int) -> bytes:
    """One member declaring (and holding) ``gib`` GiB of zeros, from a ~1 MB .tar.gz."""
    size = gib << 30
    return gzip_repeating(header("big.bin", size), bytes(1 << 20), gib << 10,
                          bytes(2 * BLOCK))


def tar_gz_entries(entries: list[tuple[str, bytes | None]]) -> bytes:
    """A .tar.gz of (name, data) entries in order; data None makes a folder."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


#: run in a child: import what the test names, cap the address space ``budget`` bytes
#: above what the imports took, run the call, report how it ended, its time and peak RSS.
_CHILD = """
import json, resource, sys, time
setup = sys.argv[1]
with open(sys.argv[4], "rb") as f:
    payload = f.read()
exec(setup)
pages = int(open("/proc/self/statm").read().split()[0])
base = pages * resource.getpagesize()
budget = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (base + budget, base + budget))
start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.monotonic()
outcome = {}
try:
    exec(sys.argv[3])
    outcome["result"] = "returned"
except MemoryError:
    outcome["result"] = "MemoryError"
except Exception as exc:
    outcome["result"] = type(exc).__name__
    outcome["code"] = getattr(exc, "code", None)
    outcome["message"] = str(exc)[:300]
outcome["seconds"] = time.monotonic() - t0
outcome["peak_rss_growth_bytes"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                    - start_rss) * 1024
print(json.dumps(outcome))
"""


def run_bounded(setup: str, call: str, payload: bytes, *, budget: int,
                timeout: float) -> dict[str, Any]:
    """Run ``call`` (which reads the bytes ``payload``) after ``setup`` in a child limited
    to ``budget`` more bytes of address space; returns how it ended (``result``, ``code``,
    ``message``, ``seconds``, ``peak_rss_growth_bytes``)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    with tempfile.NamedTemporaryFile(suffix=".payload") as file:
        file.write(payload)
        file.flush()
        proc = subprocess.run([sys.executable, "-c", _CHILD, setup, str(budget), call,
                               file.name], capture_output=True, text=True, timeout=timeout,
                              env=env)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, (proc.returncode, proc.stderr[-2000:])
    return dict(json.loads(lines[-1]))
