"""The dashboard as a host-independent application: a request path in, a :class:`Response`
out. ``agilerl dashboard`` serves it with the standard library (:mod:`agilerl.dashboard.server`);
another host (the Arena server, behind its own authentication) can mount the same object.

Routes (all ``GET``; every other method is refused):

- ``/`` the page; ``/static/<file>`` its scripts and styles, shipped in the package;
- ``/api/runs`` every run's summary;
- ``/api/runs/<id>`` one run: summary, resolved manifest, checkpoints, downloadable files;
- ``/api/runs/<id>/metrics?since=N`` ``metrics.csv`` from row ``N`` on, as numbers;
- ``/api/runs/<id>/events?since=N`` ``events.jsonl`` from event ``N`` on (both with
  ``file``: when it changes, the file was rewritten and a reader starts again at 0);
- ``/api/runs/<id>/download/<path>`` a file of the run, or a checkpoint folder as a tar.

A run id is one URL segment (percent-encode its ``/``). A path segment that decodes to ``..``
is refused with 400 whatever route it is on, and files are served only from inside a run
folder the index found, after resolving symbolic links.
"""

from __future__ import annotations

import json
import mimetypes
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qs, unquote

from agilerl.dashboard.readers import (
    CHECKPOINTS_DIR,
    ELITE_FILE,
    EVENTS_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    file_id,
    list_checkpoints,
    read_events,
    read_manifest,
    read_metrics,
)
from agilerl.dashboard.runs import RunFolder, RunsIndex, summarize

__all__ = ["SECURITY_HEADERS", "DashboardApp", "Response"]

#: sent with every response: scripts, styles and data only from this origin, no framing,
#: no content-type guessing.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                               "form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
#: files of a run folder that may be downloaded besides those under ``checkpoints/``.
DOWNLOADABLE = (ELITE_FILE, MANIFEST_FILE, METRICS_FILE, EVENTS_FILE)
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
CHUNK = 1 << 16


@dataclass
class Response:
    """Status, content type, body (bytes, or chunks for a stream) and extra headers."""

    status: int
    content_type: str
    body: bytes | Iterable[bytes]
    headers: dict[str, str] = field(default_factory=dict)

    def all_headers(self) -> dict[str, str]:
        """The headers to send: content type, security headers, then this response's own."""
        cache = "no-store" if self.content_type.startswith("application/json") else "no-cache"
        return {"Content-Type": self.content_type, "Cache-Control": cache,
                **SECURITY_HEADERS, **self.headers}


def _json(data: object, status: int = 200) -> Response:
    body = json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
    return Response(status, "application/json; charset=utf-8", body)


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def _since(query: dict[str, list[str]]) -> int:
    try:
        return max(0, int(query.get("since", ["0"])[0]))
    except ValueError:
        return 0


class DashboardApp:
    """Answers the dashboard's requests over the run folders of ``index``."""

    def __init__(self, index: RunsIndex, static: Path | None = None):
        self.index = index
        self.static = static or Path(str(resources.files("agilerl.dashboard") / "static"))

    def handle(self, method: str, target: str) -> Response:
        """The response to ``method target`` (``target``: the raw path and query)."""
        if method not in ("GET", "HEAD"):
            return _error(405, f"{method} is not allowed: the dashboard is read-only")
        path, _, query_text = target.partition("?")
        raw = [part for part in path.split("/") if part]
        segments = [unquote(part) for part in raw]
        if any(".." in _parts(segment) for segment in segments) or any(
                "\x00" in segment for segment in segments):
            return _error(400, "path traversal refused: '..' is not allowed in a path")
        query = parse_qs(query_text)
        try:
            if not segments or segments == ["index.html"]:
                return self._static("index.html")
            if segments[0] == "static" and len(segments) == 2:
                return self._static(segments[1])
            if segments[0] == "api" and len(segments) >= 2 and segments[1] == "runs":
                return self._api(segments[2:], query)
        except OSError as exc:  # unreadable (permissions) or gone mid-request (pruned)
            return _error(500, f"cannot read the run's files: {exc.strerror or exc}")
        return _error(404, "no such page")

    def _static(self, name: str) -> Response:
        if "/" in name or "\\" in name or name.startswith("."):
            return _error(404, "no such file")
        path = self.static / name
        if not path.is_file():
            return _error(404, "no such file")
        kind = _TYPES.get(path.suffix, "application/octet-stream")
        return Response(200, kind, path.read_bytes())

    def _api(self, rest: list[str], query: dict[str, list[str]]) -> Response:
        if not rest:
            return _json({"runs": [summarize(run) for run in self.index.runs()],
                          "roots": [str(root) for root in self.index.roots]})
        run = self.index.find(rest[0])
        if run is None:
            return _error(404, "no such run")
        if len(rest) == 1:
            return _json(self._detail(run))
        if rest[1] == "metrics" and len(rest) == 2:
            metrics = read_metrics(run.path)
            start = _since(query)
            return _json({"columns": metrics.columns, "rows": metrics.rows[start:],
                          "since": start, "total": len(metrics.rows),
                          "file": file_id(run.path / METRICS_FILE)})
        if rest[1] == "events" and len(rest) == 2:
            events = read_events(run.path)
            start = _since(query)
            return _json({"events": events[start:], "since": start, "total": len(events),
                          "recorded": (run.path / EVENTS_FILE).is_file(),
                          "file": file_id(run.path / EVENTS_FILE)})
        if rest[1] == "download" and len(rest) >= 3:
            return self._download(run, rest[2:])
        return _error(404, "no such page")

    def _detail(self, run: RunFolder) -> dict[str, object]:
        text, _ = read_manifest(run.path)
        files = [name for name in DOWNLOADABLE if (run.path / name).is_file()]
        return {"summary": summarize(run), "manifest": text,
                "checkpoints": list_checkpoints(run.path), "files": files}

    def _download(self, run: RunFolder, parts: list[str]) -> Response:
        relative = "/".join(parts)
        allowed = relative in DOWNLOADABLE or (parts[0] == CHECKPOINTS_DIR and len(parts) in (2, 3))
        base = run.path.resolve()
        target = (run.path / relative).resolve()
        if not allowed or not target.is_relative_to(base) or not target.exists():
            return _error(404, "no such file in this run")
        if target.is_dir():
            return Response(200, "application/x-tar", _tar_stream(target), {
                "Content-Disposition": _attachment(f"{run.name}-{target.name}.tar")})
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if target.suffix in (".yaml", ".csv", ".jsonl"):
            kind = "text/plain; charset=utf-8"
        return Response(200, kind, _file_stream(target), {
            "Content-Length": str(target.stat().st_size),
            "Content-Disposition": _attachment(target.name)})


def _parts(segment: str) -> list[str]:
    return segment.replace("\\", "/").split("/")


def _attachment(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return f'attachment; filename="{safe}"'


def _file_stream(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def _tar_stream(folder: Path) -> Iterator[bytes]:
    """``folder``'s files as an uncompressed tar, read while it is sent (weights do not
    compress, and a population's checkpoint may be larger than memory should hold)."""
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.is_symlink():
            continue
        stat = path.stat()
        info = tarfile.TarInfo(f"{folder.name}/{path.name}")
        info.size, info.mtime, info.mode = stat.st_size, int(stat.st_mtime), 0o644
        yield info.tobuf(format=tarfile.PAX_FORMAT)
        sent = 0
        for chunk in _file_stream(path):
            chunk = chunk[:info.size - sent]
            sent += len(chunk)
            yield chunk
        yield b"\0" * (info.size - sent + (-info.size) % tarfile.BLOCKSIZE)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)
