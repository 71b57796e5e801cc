"""Authentication over real HTTP: tokens, JWTs, the device flow, and file permissions."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import sys
import time
from typing import Any

import httpx
import jwt

OIDC = "/realms/arena/protocol/openid-connect"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _me(base: str, token: str) -> httpx.Response:
    return httpx.get(f"{base}/api/users/current", headers={"Authorization": f"Bearer {token}"})


def test_health_is_the_only_open_route(server: Any) -> None:
    srv, _ = server
    assert httpx.get(f"{srv.base_url}/health").json()["ok"] is True
    for path in ("/api/users/current", "/api/cli/v1/projects", "/api/cli/v1/experiments/list",
                 "/api/cli/v1/resources/list", "/api/cli/v1/datasets"):
        resp = httpx.get(f"{srv.base_url}{path}")
        assert resp.status_code == 401, path
        assert resp.json()["error_code"] == "UNAUTHORIZED"
        assert resp.json()["ok"] is False


def test_personal_access_token(server: Any) -> None:
    srv, _ = server
    resp = _me(srv.base_url, srv.token)
    assert resp.status_code == 200
    assert resp.json() == {"ok": True, "data": {
        "id": 1, "email": "tester@localhost", "first_name": "tester", "last_name": "",
        "username": "tester", "is_admin": True}}
    tampered = srv.token[:-1] + ("0" if srv.token[-1] != "0" else "1")
    for bad in (tampered, "arena_pat_nonsense", "not-a-jwt"):
        resp = _me(srv.base_url, bad)
        assert resp.status_code == 401, bad
        assert resp.headers["www-authenticate"] == "Bearer"
    resp = httpx.get(f"{srv.base_url}/api/users/current",
                     headers={"Authorization": f"Basic {srv.token}"})
    assert resp.status_code == 401


def test_secrets_are_hashed_and_owner_only(server: Any) -> None:
    srv, _ = server
    data = srv.data_dir
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "jwt_secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((data / "arena.sqlite3").stat().st_mode) == 0o600
    db = sqlite3.connect(data / "arena.sqlite3")
    try:
        (stored,) = db.execute("SELECT token_hash FROM tokens").fetchone()
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        db.close()
    assert srv.token not in stored and len(stored) == 64
    assert mode == "wal"


def test_jwt_signature_and_expiry_are_checked(server: Any) -> None:
    srv, _ = server
    secret = (srv.data_dir / "jwt_secret").read_bytes()
    now = int(time.time())
    claims = {"iss": "agilerl-arena-server", "sub": "1", "typ": "access", "jti": "x",
              "iat": now - 100}
    good = jwt.encode({**claims, "exp": now + 60}, secret, algorithm="HS256")
    assert _me(srv.base_url, good).status_code == 200
    expired = jwt.encode({**claims, "exp": now - 10}, secret, algorithm="HS256")
    resp = _me(srv.base_url, expired)
    assert resp.status_code == 401 and "expired" in resp.json()["error"]
    forged = jwt.encode({**claims, "exp": now + 60}, b"another-secret-that-is-long-enough-for-hs256", algorithm="HS256")
    assert _me(srv.base_url, forged).status_code == 401
    refresh_typed = jwt.encode({**claims, "typ": "refresh", "exp": now + 60}, secret,
                               algorithm="HS256")
    assert _me(srv.base_url, refresh_typed).status_code == 401


def _start_device(base: str) -> dict[str, Any]:
    resp = httpx.post(f"{base}{OIDC}/auth/device",
                      data={"client_id": "arena-cli", "scope": "openid profile email"})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _poll(base: str, device_code: str) -> httpx.Response:
    # python-keycloak also sends empty username/password/code/redirect_uri fields.
    return httpx.post(f"{base}{OIDC}/token", data={
        "grant_type": DEVICE_GRANT, "device_code": device_code, "client_id": "arena-cli",
        "username": "", "password": "", "code": "", "redirect_uri": "", "scope": "openid"})


def test_device_flow_refresh_and_logout(server: Any) -> None:
    srv, api = server
    start = _start_device(srv.base_url)
    assert start["verification_uri_complete"].endswith(f"/device?user_code={start['user_code']}")
    assert start["interval"] == 0 and start["expires_in"] > 0
    pending = _poll(srv.base_url, start["device_code"])
    assert pending.status_code == 400 and pending.json()["error"] == "authorization_pending"

    resp = api.post("/api/admin/device/approve", {"user_code": start["user_code"].lower()})
    assert resp.status_code == 200, resp.text
    tokens = _poll(srv.base_url, start["device_code"])
    assert tokens.status_code == 200, tokens.text
    body = tokens.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] > 0
    assert jwt.decode(body["access_token"], options={"verify_signature": False})["exp"] > 0
    assert _me(srv.base_url, body["access_token"]).json()["data"]["first_name"] == "tester"
    again = _poll(srv.base_url, start["device_code"])
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

    refreshed = httpx.post(f"{srv.base_url}{OIDC}/token", data={
        "grant_type": "refresh_token", "refresh_token": body["refresh_token"],
        "client_id": "arena-cli"})
    assert refreshed.status_code == 200, refreshed.text
    new = refreshed.json()
    assert _me(srv.base_url, new["access_token"]).status_code == 200
    reused = httpx.post(f"{srv.base_url}{OIDC}/token", data={
        "grant_type": "refresh_token", "refresh_token": body["refresh_token"]})
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"

    out = httpx.post(f"{srv.base_url}{OIDC}/logout",
                     data={"client_id": "arena-cli", "refresh_token": new["refresh_token"]})
    assert out.status_code == 204
    after = httpx.post(f"{srv.base_url}{OIDC}/token", data={
        "grant_type": "refresh_token", "refresh_token": new["refresh_token"]})
    assert after.json()["error"] == "invalid_grant"


def test_device_flow_slow_down_expiry_and_unknown_realm(make_server: Any) -> None:
    srv, _ = make_server(device_poll_interval_s=30)
    start = _start_device(srv.base_url)
    assert _poll(srv.base_url, start["device_code"]).json()["error"] == "authorization_pending"
    assert _poll(srv.base_url, start["device_code"]).json()["error"] == "slow_down"
    assert _poll(srv.base_url, "bogus").json()["error"] == "invalid_grant"
    resp = httpx.post(f"{srv.base_url}/realms/other/protocol/openid-connect/auth/device",
                      data={"client_id": "arena-cli"})
    assert resp.status_code == 404

    srv2, _ = make_server(device_code_ttl_s=0)
    start = _start_device(srv2.base_url)
    expired = _poll(srv2.base_url, start["device_code"])
    assert expired.status_code == 400 and expired.json()["error"] == "expired_token"


def test_device_approval_page_and_cli(server: Any) -> None:
    srv, _ = server
    start = _start_device(srv.base_url)
    page = httpx.get(start["verification_uri_complete"])
    assert page.status_code == 200 and start["user_code"] in page.text
    refused = httpx.post(f"{srv.base_url}/device",
                         data={"user_code": start["user_code"], "api_key": "wrong"})
    assert refused.status_code == 401
    done = httpx.post(f"{srv.base_url}/device",
                      data={"user_code": start["user_code"], "api_key": srv.token})
    assert done.status_code == 200
    assert _poll(srv.base_url, start["device_code"]).status_code == 200

    start = _start_device(srv.base_url)
    cli = subprocess.run(
        [sys.executable, "-m", "agilerl.arena.server.cli", "device", "approve",
         "--data-dir", str(srv.data_dir), "--user", "tester", start["user_code"]],
        capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert _poll(srv.base_url, start["device_code"]).status_code == 200


def test_token_endpoint_admin_rules(server: Any) -> None:
    srv, api = server
    resp = api.post("/api/admin/tokens", {"user": "alice"})
    assert resp.status_code == 201
    alice = resp.json()["data"]["token"]
    assert alice.startswith("arena_pat_")
    assert _me(srv.base_url, alice).json()["data"]["first_name"] == "alice"
    forbidden = httpx.post(f"{srv.base_url}/api/admin/tokens", json={"user": "bob"},
                           headers={"Authorization": f"Bearer {alice}"})
    assert forbidden.status_code == 403 and forbidden.json()["error_code"] == "FORBIDDEN"
