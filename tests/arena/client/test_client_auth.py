"""Credentials file safety, precedence, device login, refresh and logout."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from agilerl.arena import config
from agilerl.arena.auth import Authenticator, jwt_expiry, token_is_fresh
from agilerl.arena.errors import ArenaAuthError, ArenaTimeoutError

from .conftest import BASE, Recorder, fresh_jwt, make_jwt

DEVICE = "/realms/arena/protocol/openid-connect/auth/device"
TOKEN = "/realms/arena/protocol/openid-connect/token"
LOGOUT = "/realms/arena/protocol/openid-connect/logout"


class Clock:
    """A fake monotonic clock advanced by the fake sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def make_auth(server: Recorder, api_key: str | None = None) -> Authenticator:
    return Authenticator(config.settings(), api_key, transport=httpx.MockTransport(server))


def device_grant(interval: int = 5, expires_in: int = 600) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "device_code": "dev-123",
            "user_code": "ABCD-EFGH",
            "verification_uri": f"{BASE}/device",
            "verification_uri_complete": f"{BASE}/device?user_code=ABCD-EFGH",
            "expires_in": expires_in,
            "interval": interval,
        },
    )


def token_error(name: str) -> httpx.Response:
    return httpx.Response(400, json={"error": name})


def tokens(access: str | None = None, refresh: str = "refresh-xyz") -> httpx.Response:
    return httpx.Response(
        200,
        json={"access_token": access or fresh_jwt(), "refresh_token": refresh, "expires_in": 300},
    )


def cred_file(home: Path) -> Path:
    return home / ".arena" / "credentials.json"


# -- file safety ---------------------------------------------------------------------------
def test_credentials_are_private_from_the_first_byte(isolated_home, server) -> None:
    old = os.umask(0)  # the most permissive umask: the file must still be 0600
    try:
        make_auth(server).store_api_key("arena_pat_abc_secret")
    finally:
        os.umask(old)
    path = cred_file(isolated_home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text())["api_key"] == "arena_pat_abc_secret"


def test_an_existing_open_folder_is_closed_and_temp_files_are_0600(
    isolated_home, monkeypatch
) -> None:
    folder = isolated_home / ".arena"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    modes: list[int] = []
    real_replace = os.replace

    def spy_replace(src: Any, dst: Any) -> None:
        modes.append(stat.S_IMODE(os.stat(src).st_mode))  # the temp file, before the swap
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy_replace)
    old = os.umask(0)
    try:
        config.write_private_json(folder / "credentials.json", {"access_token": "t"})
    finally:
        os.umask(old)
    assert modes == [0o600]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [p.name for p in folder.iterdir()] == ["credentials.json"]  # no temp left


def test_replacement_is_atomic_under_concurrent_writers(isolated_home) -> None:
    path = cred_file(isolated_home)

    def writer(i: int) -> None:
        for j in range(20):
            config.write_private_json(path, {"access_token": f"{i}-{j}", "pad": "x" * 2000})

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert json.loads(path.read_text())["access_token"].endswith("-19")
    assert len(list(path.parent.iterdir())) == 1


# -- precedence ----------------------------------------------------------------------------
def test_precedence_argument_then_env_then_store(isolated_home, server, monkeypatch) -> None:
    make_auth(server).store_api_key("arena_pat_stored")
    assert make_auth(server).bearer() == "arena_pat_stored"
    monkeypatch.setenv("ARENA_API_KEY", "arena_pat_env")
    assert make_auth(server).bearer() == "arena_pat_env"
    assert make_auth(server, "arena_pat_arg").bearer() == "arena_pat_arg"


def test_stored_credentials_for_another_server_are_not_sent(
    isolated_home, server, monkeypatch
) -> None:
    make_auth(server).store_api_key("arena_pat_for_arena_test")
    monkeypatch.setenv("ARENA_BASE_URL", "http://other.test")
    with pytest.raises(ArenaAuthError):
        make_auth(server).bearer()


def test_legacy_token_file_without_server_is_used(isolated_home, server) -> None:
    path = cred_file(isolated_home)
    path.parent.mkdir()
    path.write_text(json.dumps({"access_token": "opaque-token"}))
    assert make_auth(server).bearer() == "opaque-token"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"refresh_token": "r"}'])
def test_unusable_credentials_files_are_ignored(isolated_home, server, content) -> None:
    path = cred_file(isolated_home)
    path.parent.mkdir()
    path.write_text(content)
    assert not make_auth(server).is_authenticated


def test_repr_never_shows_secrets(isolated_home, server) -> None:
    auth = make_auth(server, "arena_pat_uuid_topsecret")
    auth._tokens = {"access_token": "eyJhbGciOiJ.eyJzdWIiOiJ.sig", "refresh_token": "r-secret"}
    text = repr(auth) + str(vars(auth).get("source"))
    assert "topsecret" not in text and "r-secret" not in text and "eyJ" not in text


# -- JWT -----------------------------------------------------------------------------------
def test_jwt_expiry_and_freshness() -> None:
    assert jwt_expiry(make_jwt(1234)) == 1234
    assert jwt_expiry("opaque") is None
    assert jwt_expiry("a.b.c") is None
    assert token_is_fresh(make_jwt(1000 + 61), now=1000)
    assert not token_is_fresh(make_jwt(1000 + 59), now=1000)


# -- device flow ---------------------------------------------------------------------------
def _login(auth: Authenticator, clock: Clock, timeout: float = 300) -> list[tuple[str, Any]]:
    prompts: list[tuple[str, Any]] = []
    auth.login(
        timeout,
        open_browser=False,
        prompt=lambda url, code: prompts.append((url, code)),
        sleep=clock.sleep,
        clock=clock,
    )
    return prompts


def test_device_flow_polls_until_approved(isolated_home, server) -> None:
    access = fresh_jwt("ada")
    server.add("POST", DEVICE, device_grant(interval=2))
    server.add(
        "POST",
        TOKEN,
        token_error("authorization_pending"),
        token_error("slow_down"),
        tokens(access),
    )
    clock = Clock()
    auth = make_auth(server)
    prompts = _login(auth, clock)
    assert prompts == [(f"{BASE}/device?user_code=ABCD-EFGH", "ABCD-EFGH")]
    assert clock.sleeps == [2, 2, 7]  # slow_down adds five seconds to the interval
    assert auth.bearer() == access
    stored = json.loads(cred_file(isolated_home).read_text())
    assert stored["access_token"] == access and stored["refresh_token"] == "refresh-xyz"
    forms = [r.content.decode() for r in server.requests if r.url.path == TOKEN]
    assert all(
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code" in f for f in forms
    )
    assert "client_id=arena-cli" in server.last(DEVICE).content.decode()


def test_expired_device_code_is_a_timeout(isolated_home, server) -> None:
    server.add("POST", DEVICE, device_grant())
    server.add("POST", TOKEN, token_error("expired_token"))
    with pytest.raises(ArenaTimeoutError, match="expired"):
        _login(make_auth(server), Clock())


def test_deadline_is_a_timeout(isolated_home, server) -> None:
    server.add("POST", DEVICE, device_grant(interval=5))
    server.add("POST", TOKEN, token_error("authorization_pending"))
    clock = Clock()
    with pytest.raises(ArenaTimeoutError, match="timed out after 20s"):
        _login(make_auth(server), clock, timeout=20)
    assert clock.now <= 20 and len(clock.sleeps) == 4


def test_denied_login_and_failed_start_are_auth_errors(isolated_home, server) -> None:
    server.add("POST", DEVICE, device_grant())
    server.add("POST", TOKEN, token_error("access_denied"))
    with pytest.raises(ArenaAuthError, match="access_denied"):
        _login(make_auth(server), Clock())
    server.add("POST", DEVICE, httpx.Response(400, json={"error": "invalid_client"}))
    with pytest.raises(ArenaAuthError, match="Failed to initiate device authorization"):
        _login(make_auth(server), Clock())


def test_login_reuses_a_valid_token_and_refreshes_an_old_one(isolated_home, server) -> None:
    path = cred_file(isolated_home)
    path.parent.mkdir()
    path.write_text(json.dumps({"access_token": fresh_jwt(), "refresh_token": "r"}))
    _login(make_auth(server), Clock())
    assert server.requests == []  # still valid: nothing to do
    stale = make_jwt(0)
    path.write_text(json.dumps({"access_token": stale, "refresh_token": "r", "keep": 1}))
    new = fresh_jwt("n")
    server.add("POST", TOKEN, tokens(new, "r2"))
    auth = make_auth(server)  # the constructor refreshes nothing by itself
    _login(auth, Clock())
    assert auth.bearer() == new
    stored = json.loads(path.read_text())
    assert stored["keep"] == 1 and stored["refresh_token"] == "r2"
    assert all(r.url.path != DEVICE for r in server.requests)


def test_ensure_fresh_refreshes_ahead_of_expiry_and_swallows_errors(isolated_home, server) -> None:
    path = cred_file(isolated_home)
    path.parent.mkdir()
    path.write_text(json.dumps({"access_token": make_jwt(0), "refresh_token": "r"}))
    server.add("POST", TOKEN, httpx.Response(400, json={"error": "invalid_grant"}))
    auth = make_auth(server)
    auth.ensure_fresh()  # no exception
    assert len(server.requests) == 1


def test_logout_revokes_and_deletes(isolated_home, server) -> None:
    path = cred_file(isolated_home)
    path.parent.mkdir()
    path.write_text(json.dumps({"access_token": fresh_jwt(), "refresh_token": "r-1"}))
    server.add("POST", LOGOUT, httpx.Response(204))
    auth = make_auth(server)
    auth.logout()
    assert not path.exists() and not auth.is_authenticated
    assert "refresh_token=r-1" in server.last(LOGOUT).content.decode()


def test_logout_ignores_an_unreachable_auth_server(isolated_home, server) -> None:
    path = cred_file(isolated_home)
    path.parent.mkdir()
    path.write_text(json.dumps({"access_token": "a", "refresh_token": "r"}))
    server.add("POST", LOGOUT, httpx.ConnectError("down"))
    make_auth(server).logout()
    assert not path.exists()
