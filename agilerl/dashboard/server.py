"""Serve :class:`~agilerl.dashboard.api.DashboardApp` with the standard library's threading
HTTP server (no extra dependency: the dashboard works on a plain ``pip install agilerl``)."""

from __future__ import annotations

import ipaddress
import json
import os
import threading
from collections.abc import Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agilerl.dashboard.api import DashboardApp, Response
from agilerl.dashboard.runs import RunsIndex

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DashboardServer", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050
_LOCAL_NAMES = {"localhost", "127.0.0.1", "[::1]", "::1"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (a name other than ``localhost`` is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str | None) -> str:
    """The host part of a ``Host`` header (``[::1]:8050`` -> ``[::1]``)."""
    value = (header or "").strip().lower()
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    protocol_version = "HTTP/1.1"
    server_version = "agilerl-dashboard"

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _refuse(self) -> None:
        self.send_error(405, "the dashboard is read-only")

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _answer(self, body: bool) -> None:
        if self.server.local_only and _host_name(self.headers.get("Host")) not in _LOCAL_NAMES:
            # A page elsewhere that renamed its host to this address (DNS rebinding) must
            # not read the runs: a loopback dashboard answers only to a loopback name.
            self.send_error(403, "this dashboard answers only to localhost")
            return
        try:
            response = self.server.app.handle(self.command, self.path)
        except Exception as exc:  # a bug must cost one request, not a traceback per poll
            response = Response(500, "application/json", json.dumps(
                {"error": f"internal error: {type(exc).__name__}"}).encode())
        headers = response.all_headers()
        payload = response.body
        if isinstance(payload, bytes):
            headers["Content-Length"] = str(len(payload))
        elif "Content-Length" not in headers:
            headers["Connection"] = "close"
            self.close_connection = True
        self.send_response(response.status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if not body:
            if not isinstance(payload, bytes):
                getattr(payload, "close", lambda: None)()
            return
        self._write(payload)

    def _write(self, payload: bytes | Iterable[bytes]) -> None:
        try:
            if isinstance(payload, bytes):
                self.wfile.write(payload)
            else:
                for chunk in payload:
                    self.wfile.write(chunk)
        except OSError:
            # the browser left (a page change, a closed tab), or a streamed file went away
            # (a checkpoint pruned while it was downloaded): end this connection only
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        if self.server.verbose:
            super().log_message(format, *args)


class DashboardServer(ThreadingHTTPServer):
    """The dashboard over ``roots`` at ``host:port`` (port 0: any free port)."""

    daemon_threads = True

    def __init__(self, roots: Sequence[str | os.PathLike[str]], host: str = DEFAULT_HOST,
                 port: int = DEFAULT_PORT, verbose: bool = False):
        if ":" in host:
            import socket

            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)
        self.app = DashboardApp(RunsIndex(roots))
        self.local_only = is_loopback(host)
        self.verbose = verbose

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/"

    def start_background(self) -> threading.Thread:
        """Serve from a daemon thread (tests, scripts); ``shutdown()`` stops it."""
        thread = threading.Thread(target=self.serve_forever, name="agilerl-dashboard",
                                  daemon=True)
        thread.start()
        return thread
