"""Start a real server on a random loopback port, for tests of the server and of clients.

    from agilerl.arena.server.testing import running_server

    with running_server(tmp_path, slots=2) as srv:
        httpx.get(f"{srv.base_url}/api/users/current",
                  headers={"Authorization": f"Bearer {srv.token}"})

``running_server`` runs uvicorn in a thread of this process; ``server_process`` runs
``arena-server serve`` as a subprocess (what restart tests need). Both bind 127.0.0.1 only,
wait (bounded) until the server answers, and stop everything they started on exit.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agilerl.arena.server.cli import bind
from agilerl.arena.server.config import ServerConfig

STARTUP_TIMEOUT_S = 30.0
_URL_LINE = re.compile(r"listening on (http://\S+)")


@dataclass
class RunningServer:
    base_url: str
    token: str
    data_dir: Path
    user: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def env(self) -> dict[str, str]:
        """Environment variables that point the Arena client and CLI at this server."""
        return {"ARENA_BASE_URL": self.base_url, "ARENA_KEYCLOAK_URL": self.base_url,
                "ARENA_API_KEY": self.token}


def create_token(data_dir: Path, user: str = "tester", *, admin: bool = False) -> str:
    """A personal access token for ``user`` in the server database under ``data_dir``."""
    from agilerl.arena.server.auth import Authenticator
    from agilerl.arena.server.store import Store

    cfg = ServerConfig(data_dir=data_dir)
    cfg.ensure_dirs()
    store = Store(cfg.db_path)
    try:
        return Authenticator(store, cfg).create_pat(user, admin=admin)
    finally:
        store.close()


@contextmanager
def running_server(tmp_path: Path, *, user: str = "tester", **config: Any) -> Iterator[RunningServer]:
    """An in-process server (uvicorn in a thread); ``config`` sets :class:`ServerConfig` fields.

    ``job_command`` defaults to ``<python> -m agilerl.train``.
    """
    import uvicorn

    from agilerl.arena.server.app import create_app

    data_dir = Path(config.pop("data_dir", Path(tmp_path) / "arena-data"))
    token = create_token(data_dir, user, admin=True)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    cfg = ServerConfig(data_dir=data_dir, public_url=base, **config)
    server = uvicorn.Server(uvicorn.Config(create_app(cfg), log_level="warning",
                                           lifespan="on", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="arena-test-server")
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("arena test server did not start")
            time.sleep(0.02)
        yield RunningServer(base_url=base, token=token, data_dir=data_dir, user=user)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@contextmanager
def server_process(data_dir: Path, *args: str,
                   env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``arena-server serve --port 0 --data-dir DATA_DIR *args`` as a subprocess.

    Yields ``(base_url, process)``; the process is terminated (then killed) on exit unless
    the caller already ended it.
    """
    cmd = [sys.executable, "-m", "agilerl.arena.server.cli", "serve", "--host", "127.0.0.1",
           "--port", "0", "--data-dir", str(data_dir), "--log-level", "warning", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    try:
        yield _await_url(proc), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def _await_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                raise RuntimeError("arena-server exited: " + "".join(seen)[-2000:])
            continue
        seen.append(line)
        match = _URL_LINE.search(line)
        if match:
            url = match.group(1)
            _wait_healthy(url, deadline)
            # Keep draining stderr so a chatty server never blocks on a full pipe.
            threading.Thread(target=_drain, args=(proc,), daemon=True).start()
            return url
    raise RuntimeError("arena-server did not report its address in time")


def _drain(proc: subprocess.Popen[str]) -> None:
    if proc.stderr is None:
        return
    try:
        for _ in proc.stderr:
            pass
    except ValueError:  # closed by the context manager
        pass


def _wait_healthy(url: str, deadline: float) -> None:
    import httpx

    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"arena-server at {url} never became healthy")
