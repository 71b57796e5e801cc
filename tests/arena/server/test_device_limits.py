"""The unauthenticated device-login endpoint: bounded fields, a per-address rate limit,
expired codes purged, so anonymous requests cannot grow the database."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx

from agilerl.arena.server.ratelimit import RateLimiter

DEVICE = "/realms/arena/protocol/openid-connect/auth/device"
#: "a few KB": what 100 refused requests may add to the database and its WAL, at most.
GROWTH_LIMIT = 4096


def _db_bytes(data_dir: Path) -> int:
    """The database's size once its write-ahead log is folded in (the WAL is reused)."""
    db = sqlite3.connect(data_dir / "arena.sqlite3")
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return sum(p.stat().st_size for p in data_dir.glob("arena.sqlite3*"))


def _device_rows(data_dir: Path) -> int:
    db = sqlite3.connect(data_dir / "arena.sqlite3")
    try:
        return int(db.execute("SELECT COUNT(*) FROM device_codes").fetchone()[0])
    finally:
        db.close()


def test_100_oversize_device_requests_store_nothing(make_server: Any) -> None:
    srv, _ = make_server(device_rate_burst=1000, device_rate_per_minute=1000)
    before = _db_bytes(srv.data_dir)
    with httpx.Client(base_url=srv.base_url, timeout=30) as http:
        for i in range(100):
            field = "client_id" if i % 2 else "scope"
            data = {"client_id": "arena-cli", field: "x" * 100_000}
            resp = http.post(DEVICE, data=data)
            assert resp.status_code == 400, resp.text
            assert resp.json()["error"] == "invalid_request"
        long_id = http.post(DEVICE, data={"client_id": "c" * 129})
        assert long_id.status_code == 400 and "client_id" in long_id.json()["error_description"]
    assert _device_rows(srv.data_dir) == 0
    assert _db_bytes(srv.data_dir) - before <= GROWTH_LIMIT


def test_device_logins_are_rate_limited_per_address(make_server: Any) -> None:
    srv, _ = make_server(device_rate_burst=3, device_rate_per_minute=1)
    before = _db_bytes(srv.data_dir)
    with httpx.Client(base_url=srv.base_url, timeout=30) as http:
        codes = [http.post(DEVICE, data={"client_id": "arena-cli"}) for _ in range(100)]
    assert [r.status_code for r in codes[:3]] == [200, 200, 200]
    refused = codes[3:]
    assert {r.status_code for r in refused} == {429}
    assert refused[0].json()["error"] == "slow_down"
    assert int(refused[0].headers["retry-after"]) >= 1
    assert _device_rows(srv.data_dir) == 3
    assert _db_bytes(srv.data_dir) - before <= GROWTH_LIMIT


def test_expired_device_codes_are_purged_and_live_ones_capped(make_server: Any) -> None:
    srv, _ = make_server(device_code_ttl_s=0, device_rate_burst=100)
    with httpx.Client(base_url=srv.base_url, timeout=30) as http:
        for _ in range(5):
            assert http.post(DEVICE, data={"client_id": "arena-cli"}).status_code == 200
    assert _device_rows(srv.data_dir) == 1  # each start deletes the expired ones

    srv, _ = make_server(max_pending_device_codes=2, device_rate_burst=100)
    with httpx.Client(base_url=srv.base_url, timeout=30) as http:
        answers = [http.post(DEVICE, data={"client_id": "arena-cli"}) for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 200, 429]
    assert _device_rows(srv.data_dir) == 2


def test_rate_limiter_refills_and_stays_bounded() -> None:
    now = [0.0]
    limiter = RateLimiter(per_minute=60, burst=2, max_clients=3, clock=lambda: now[0])
    assert limiter.allow("a") == 0.0 and limiter.allow("a") == 0.0
    assert limiter.allow("a") > 0.0
    assert limiter.allow("b") == 0.0  # another address has its own bucket
    now[0] += 1.0  # one request a second
    assert limiter.allow("a") == 0.0 and limiter.allow("a") > 0.0
    for address in "cdefgh":
        limiter.allow(address)
    assert len(limiter._buckets) <= 3
