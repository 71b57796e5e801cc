"""``arena-server`` in a subprocess: tokens, usage errors, unusable ports and folders."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agilerl.arena.server.testing import server_process

CLI = [sys.executable, "-m", "agilerl.arena.server.cli"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def test_tokens_create_prints_only_the_token_and_it_works(tmp_path: Path) -> None:
    data = tmp_path / "d"
    out = _run("tokens", "create", "--data-dir", str(data), "--user", "dana")
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    assert out.stdout == token + "\n" and token.startswith("arena_pat_")
    assert token not in (data / "arena.sqlite3").read_bytes().decode("latin-1")
    with server_process(data) as (base, _):
        me = httpx.get(f"{base}/api/users/current",
                       headers={"Authorization": f"Bearer {token}"})
        assert me.json()["data"]["first_name"] == "dana"
        assert httpx.get(f"{base}/api/users/current").status_code == 401


def test_usage_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    for args in (("serve",), ("serve", "--data-dir", str(tmp_path), "--slots", "0"),
                 ("serve", "--data-dir", str(tmp_path), "--port", "http"),
                 ("serve", "--data-dir", str(tmp_path), "--job-env", "ARENA_TEST_UNSET_VAR"),
                 ("serve", "--data-dir", str(tmp_path), "--job-env", "1BAD=x"),
                 ("tokens", "create", "--data-dir", str(tmp_path)), ("bogus",)):
        out = _run(*args)
        assert out.returncode == 2, args
        assert "Traceback" not in out.stderr and "error:" in out.stderr, out.stderr


def test_runtime_errors_exit_1_with_a_message(tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        out = _run("serve", "--data-dir", str(tmp_path / "d"), "--port", str(port))
    finally:
        busy.close()
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = _run("tokens", "create", "--data-dir", str(blocker), "--user", "x")
    assert out.returncode == 1 and "cannot use data folder" in out.stderr
    assert "Traceback" not in out.stderr
    out = _run("device", "approve", "--data-dir", str(tmp_path / "empty"), "--user", "x", "AB")
    assert out.returncode == 1 and "no server database" in out.stderr


def test_a_data_folder_serves_one_server_at_a_time(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with server_process(data) as (base, _):
        out = _run("serve", "--data-dir", str(data), "--port", "0")
        assert out.returncode == 1 and "already using" in out.stderr, out.stderr
        assert httpx.get(f"{base}/health").status_code == 200
    with server_process(data) as (base, _):  # released on shutdown
        assert httpx.get(f"{base}/health").status_code == 200


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_stopped_by_a_signal_exits_0_without_traceback(tmp_path: Path, sig: int) -> None:
    proc = subprocess.Popen([*CLI, "serve", "--port", "0", "--data-dir", str(tmp_path / "d"),
                             "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # "arena-server listening on http://..." once bound
        base = first.split("listening on ")[1].split()[0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "arena-server: stopped" in err


def test_tokens_list_and_revoke(tmp_path: Path) -> None:
    data = tmp_path / "d"
    tokens = {}
    for name, user in (("a", "dana"), ("b", "dana"), ("c", "erin")):
        out = _run("tokens", "create", "--data-dir", str(data), "--user", user)
        tokens[name] = out.stdout.strip()
    listed = _run("tokens", "list", "--data-dir", str(data))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) == 3 and all(line.endswith("  active") for line in lines)
    assert not any(t.split("_")[-1] in listed.stdout for t in tokens.values())  # no secrets
    token_id = tokens["a"].split("_")[2]
    assert any(line.startswith(f"{token_id}  dana  ") for line in lines)
    assert len(_run("tokens", "list", "--data-dir", str(data), "--user", "dana")
               .stdout.splitlines()) == 2

    with server_process(data) as (base, _):
        def status(token: str) -> int:
            return httpx.get(f"{base}/api/users/current",
                             headers={"Authorization": f"Bearer {token}"}).status_code

        assert {status(t) for t in tokens.values()} == {200}
        out = _run("tokens", "revoke", "--data-dir", str(data), tokens["a"])  # whole token
        assert out.returncode == 0 and f"revoked {token_id}" in out.stderr, out.stderr
        assert (status(tokens["a"]), status(tokens["b"]), status(tokens["c"])) == (401, 200, 200)
        out = _run("tokens", "revoke", "--data-dir", str(data), "--user", "erin")
        assert out.returncode == 0 and "revoked 1 token(s)" in out.stderr, out.stderr
        assert status(tokens["c"]) == 401 and status(tokens["b"]) == 200

    assert len(_run("tokens", "list", "--data-dir", str(data)).stdout.splitlines()) == 1
    every = _run("tokens", "list", "--data-dir", str(data), "--revoked").stdout
    assert every.count("  revoked") == 2 and every.count("  active") == 1
    again = _run("tokens", "revoke", "--data-dir", str(data), token_id)
    assert again.returncode == 1 and "no active token with id" in again.stderr
    assert _run("tokens", "revoke", "--data-dir", str(data)).returncode == 2
    missing = _run("tokens", "list", "--data-dir", str(tmp_path / "none"))
    assert missing.returncode == 1 and "no server database" in missing.stderr
    for out in (again, missing):
        assert "Traceback" not in out.stderr
