"""Error paths an attacker or a damaged install reaches: a validly signed JWT whose subject
is not a user id is a 401 (not a 500), and ``arena-server serve`` on a corrupt database
says which file is damaged and what to do, in one line, without a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

CLI = [sys.executable, "-m", "agilerl.arena.server.cli"]
OIDC = "/realms/arena/protocol/openid-connect"


def _signed(srv: Any, sub: Any, typ: str = "access") -> str:
    """A token signed with the server's own secret, as someone who holds it could make."""
    secret = (srv.data_dir / "jwt_secret").read_bytes()
    now = int(time.time())
    return jwt.encode({"iss": "agilerl-arena-server", "sub": sub, "typ": typ, "jti": "j",
                       "iat": now, "exp": now + 60}, secret, algorithm="HS256")


@pytest.mark.parametrize("sub", ["admin", "1 OR 1=1", "", " 1", "1.0", "-1", "١",
                                 "99999999999999999999999999"])
def test_signed_jwt_whose_subject_is_not_a_user_id_is_401(server: Any, sub: str) -> None:
    srv, _ = server
    resp = httpx.get(f"{srv.base_url}/api/users/current",
                     headers={"Authorization": f"Bearer {_signed(srv, sub)}"})
    assert resp.status_code == 401, resp.text
    refresh = httpx.post(f"{srv.base_url}{OIDC}/token", data={
        "grant_type": "refresh_token", "refresh_token": _signed(srv, sub, "refresh")})
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"


def test_serve_on_a_corrupt_database_says_so_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    database = data / "arena.sqlite3"
    database.write_text('{"replaced": "by an upload that planted a link"}' * 4)
    done = subprocess.run([*CLI, "serve", "--port", "0", "--data-dir", str(data)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("arena-server")]
    assert any(str(database) in line and "backup" in line for line in lines), done.stderr
    assert database.read_text().startswith('{"replaced"')  # the evidence is left as it was
