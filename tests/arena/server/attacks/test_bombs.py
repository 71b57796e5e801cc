"""Uploads built to cost the server memory, time or a 500: YAML alias bombs in an env
config, tar headers that declare gigabytes, chains of headers, and archive layouts no
file system can hold. Each is refused with a 422 naming the field or member, cheaply.

The costly parsing cases run in a child process with a capped address space
(:func:`.payloads.run_bounded`), so code that reads the bomb fails there by
``MemoryError`` instead of taking the test machine with it.
"""

from __future__ import annotations

import io
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from ..test_custom_envs import ENVS, upload
from .payloads import (
    BLOCK,
    ENV_FILE,
    declared_size_bomb,
    header,
    padded,
    pax_chain,
    pax_header_bomb,
    pax_record,
    run_bounded,
    tar_gz_entries,
    yaml_bomb,
    yaml_wide_scalar_bomb,
)

#: what parsing one upload may add to the server's memory, and take.
MEMORY_BUDGET = 256 << 20
SECONDS = 5.0


@pytest.fixture
def custom(make_server: Any) -> Any:
    return make_server(allow_custom_code=True, env_profile_s=0.3)


def _refused_env_config(resp: Any) -> None:
    assert resp.status_code == 422, resp.text[:500]
    body = resp.json()
    assert body["error_code"] == "INVALID_REQUEST", body
    assert "env_config" in body["error"] and "expands" in body["error"], body


# ---- YAML ------------------------------------------------------------------------------


@pytest.mark.parametrize("bomb", [yaml_bomb(levels=6, fan=10), yaml_wide_scalar_bomb(levels=3)],
                         ids=["alias-count", "wide-scalars"])
def test_yaml_bomb_in_env_config_is_refused_at_upload(custom: Any, bomb: str) -> None:
    srv, api = custom
    _refused_env_config(upload(api, "Bomb", {"env.py": ENV_FILE}, env_config=bomb))
    assert api.http.get(ENVS).json()["data"] == {}
    assert not (srv.data_dir / "environments" / "1" / "Bomb").exists()


@pytest.mark.parametrize("bomb", [yaml_bomb(), yaml_wide_scalar_bomb()],
                         ids=["billion-laughs", "wide-scalars"])
def test_yaml_bomb_parsing_is_bounded(bomb: str) -> None:
    out = run_bounded("from agilerl.arena.server.env_upload import parse_env_config",
                      "parse_env_config(payload)", bomb.encode(),
                      budget=MEMORY_BUDGET, timeout=60)
    assert out["result"] == "ApiError" and out["code"] == "INVALID_REQUEST", out
    assert "env_config" in out["message"], out
    assert out["seconds"] < SECONDS, out


def test_an_ordinary_env_config_still_parses() -> None:
    from agilerl.arena.server.env_upload import parse_env_config

    text = b"size: 5\nshared: &s {a: 1, b: [1, 2]}\nother: *s\nrate: 1e-4\n"
    assert parse_env_config(text) == {"size": 5, "shared": {"a": 1, "b": [1, 2]},
                                      "other": {"a": 1, "b": [1, 2]}, "rate": 1e-4}


# ---- tar headers ------------------------------------------------------------------------


def test_a_huge_pax_header_is_refused_before_tarfile_reads_it(tmp_path: Path) -> None:
    bomb = pax_header_bomb(512)  # 0.5 GiB header in a ~0.5 MB upload
    assert len(bomb) < 1 << 20
    out = run_bounded(
        "from pathlib import Path\n"
        "from agilerl.arena.server.env_archive import ArchiveLimits, unpack",
        f"unpack(payload, Path({str(tmp_path)!r}) / 'src', ArchiveLimits())", bomb,
        budget=MEMORY_BUDGET, timeout=120)
    assert out["result"] == "ApiError" and out["code"] == "ARCHIVE_REFUSED", out
    assert "extended" in out["message"] and "header" in out["message"], out
    assert out["seconds"] < SECONDS, out


def test_pax_header_bomb_upload_is_refused(custom: Any) -> None:
    srv, api = custom
    resp = upload(api, "Pax", pax_header_bomb(32))
    assert resp.status_code == 422, resp.text[:300]
    assert resp.json()["error_code"] == "ARCHIVE_REFUSED", resp.json()
    assert "header" in resp.json()["error"]
    assert not (srv.data_dir / "environments" / "1" / "Pax").exists()


def test_a_chain_of_extended_headers_is_refused(custom: Any) -> None:
    _, api = custom
    resp = upload(api, "Chain", pax_chain(2000))
    assert resp.status_code == 422, resp.text[:300]
    assert resp.json()["error_code"] == "ARCHIVE_REFUSED", resp.json()
    assert "extended headers in a row" in resp.json()["error"]
    # two in a row (a global and a member's PAX header) are ordinary
    assert upload(api, "Chain", pax_chain(2)).status_code == 200


def test_a_gzip_bomb_is_refused_from_its_declared_size(custom: Any, tmp_path: Path) -> None:
    _, api = custom
    bomb = declared_size_bomb(1)  # 1 GiB of zeros in ~1 MB
    resp = upload(api, "Zeros", bomb)
    assert resp.status_code == 422 and resp.json()["error_code"] == "ARCHIVE_REFUSED"
    assert "unpacks to more than" in resp.json()["error"]
    out = run_bounded(
        "from pathlib import Path\n"
        "from agilerl.arena.server.env_archive import ArchiveLimits, unpack",
        f"unpack(payload, Path({str(tmp_path)!r}) / 'src', ArchiveLimits())", bomb,
        budget=MEMORY_BUDGET, timeout=60)
    assert out["code"] == "ARCHIVE_REFUSED" and out["seconds"] < SECONDS, out


def test_the_stream_cap_holds_whatever_the_headers_say() -> None:
    from agilerl.arena.server.env_archive import ArchiveLimits
    from agilerl.arena.server.errors import ApiError
    from agilerl.arena.server.tar_scan import prescan

    limits = ArchiveLimits(max_members=1, max_unpacked_bytes=1 << 20, max_header_bytes=512)
    assert limits.max_stream_bytes < 2 << 20
    with pytest.raises(ApiError) as caught:
        prescan(declared_size_bomb(1), limits)
    assert caught.value.code == "ARCHIVE_REFUSED"


# ---- layouts that cannot be written (item 13: these were HTTP 500) -------------------------


LONG_NAME = "n" * 300
LONG_PATH = "/".join(["d" * 100] * 45) + "/env.py"


@pytest.mark.parametrize(("entries", "member", "words"), [
    ([("pkg", ENV_FILE), ("pkg/env.py", ENV_FILE)], "pkg/env.py", "also holds as a file"),
    ([("pkg/env.py", ENV_FILE), ("pkg", ENV_FILE)], "pkg", "file and also a folder"),
    ([("env.py", ENV_FILE), ("env.py", None)], "env.py", "folder and also a file"),
    ([("env.py", ENV_FILE), ("./env.py", ENV_FILE)], "./env.py", "appears twice"),
    ([("env.py", ENV_FILE), (LONG_NAME, ENV_FILE)], LONG_NAME, "at most 255"),
    ([("env.py", ENV_FILE), (LONG_PATH, ENV_FILE)], LONG_PATH, "at most 1024"),
], ids=["file-then-folder", "folder-then-file", "file-then-dir-entry", "twice",
        "long-name", "long-path"])
def test_unwritable_layouts_are_a_422_naming_the_member(custom: Any, entries: Any,
                                                       member: str, words: str) -> None:
    srv, api = custom
    resp = upload(api, "Layout", tar_gz_entries(entries))
    assert resp.status_code == 422, resp.text[:300]
    body = resp.json()
    assert body["error_code"] == "ARCHIVE_REFUSED", body
    assert words in body["error"], body
    shown = member if len(member) <= 120 else member[:120] + "..."
    assert body["member"] == shown and shown in body["error"], body
    assert not (srv.data_dir / "environments" / "1" / "Layout").exists()


# ---- headers tarfile would size differently from the pre-scan --------------------------


def _raw_tar(*blocks: bytes) -> bytes:
    return b"".join(blocks) + bytes(2 * BLOCK)


@pytest.mark.parametrize(("archive", "words"), [
    (_raw_tar(header("pkg", 1024, b"5"), bytes(1024), header("env.py", 0)),
     "not a regular file but declares"),
    (_raw_tar(header("pkg/", 1024, b"\0"), bytes(1024), header("env.py", 0)),
     "not a regular file but declares"),
    (_raw_tar(header("sparse.bin", 0, b"S"), header("env.py", 0)), "tar type 'S'"),
    (_raw_tar(header("././@PaxHeader", len(pax_record("size", "99999999999")), b"g"),
              padded(pax_record("size", "99999999999")), header("env.py", 0)), "'size'"),
    (_raw_tar(header("././@PaxHeader", len(pax_record("GNU.sparse.major", "1")), b"x"),
              padded(pax_record("GNU.sparse.major", "1")), header("env.py", 0)), "sparse"),
    (_raw_tar(header("././@PaxHeader", 16, b"x"),
              padded(pax_record("comment", "x")[:16]), header("env.py", 0)), "PAX record"),
    (_raw_tar(header("env.py", 3), padded(b"x=1"),
              header("bad.py", 0)[:148] + b"0000000\0" + header("bad.py", 0)[156:]),
     "bad header checksum"),
], ids=["folder-with-data", "v7-folder-with-data", "sparse", "global-size", "pax-sparse",
        "bad-pax-record", "bad-checksum-later"])
def test_headers_tarfile_would_read_differently_are_refused(archive: bytes, words: str) -> None:
    from agilerl.arena.server.env_archive import ArchiveLimits
    from agilerl.arena.server.errors import ApiError
    from agilerl.arena.server.tar_scan import prescan

    for data in (archive, zlib.compress(archive, 9, 31)):
        with pytest.raises(ApiError) as caught:
            prescan(data, ArchiveLimits())
        assert caught.value.status == 422 and words in caught.value.message, caught.value.body()


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT],
                         ids=["pax", "gnu", "ustar"])
def test_ordinary_archives_of_every_format_unpack(tmp_path: Path, fmt: int) -> None:
    from agilerl.arena.server.env_archive import ArchiveLimits, unpack

    long_dir = "d" * 120 if fmt != tarfile.USTAR_FORMAT else "pkg"
    files = {"env.py": ENV_FILE, f"{long_dir}/ünï.py": b"x = 1\n", "pkg/__init__.py": b""}
    buf = io.BytesIO()
    extra = {"pax_headers": {"comment": "git archive writes one"}} \
        if fmt == tarfile.PAX_FORMAT else {}
    with tarfile.open(fileobj=buf, mode="w:gz", format=fmt, **extra) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1.5  # a float mtime makes a PAX header
            tar.addfile(info, io.BytesIO(data))
    assert unpack(buf.getvalue(), tmp_path / "src", ArchiveLimits()) == sorted(files)
    assert (tmp_path / "src" / long_dir / "ünï.py").read_bytes() == b"x = 1\n"


def test_many_concatenated_gzip_streams_are_refused() -> None:
    """800,000 empty gzip streams in 16 MB: each costs a decompressor restart."""
    from agilerl.arena.server.env_archive import ArchiveLimits
    from agilerl.arena.server.errors import ApiError
    from agilerl.arena.server.tar_scan import prescan

    empty = zlib.compress(b"", 9, 31)
    with pytest.raises(ApiError) as caught:
        prescan(empty * ((16 << 20) // len(empty)), ArchiveLimits())
    assert "gzip streams" in caught.value.message
    two = zlib.compress(header("env.py", 0), 9, 31) + zlib.compress(bytes(2 * BLOCK), 9, 31)
    prescan(two, ArchiveLimits())  # what `cat a.gz b.gz` makes is still read
