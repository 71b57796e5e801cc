"""The browser pages: the dashboard's views over the caller's experiments, plus pages for
environments, datasets and job controls (``agilerl/arena/server/ui_static``).

``/`` and ``/static/<file>`` are the page and its scripts: the same for everyone, holding no
user data, so they need no credentials. Everything the pages show comes from ``/api/ui/...``
and the JSON API, both behind :func:`.app.current_user`: the page keeps the API key in the
tab's ``sessionStorage`` and sends it in the ``Authorization`` header. No cookie is ever
set, so another site cannot make a browser send a request that carries the user's
credentials (no CSRF), and a request without the header is answered 401.

An experiment of another user is a 404, exactly like one that does not exist.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agilerl.arena.server import ui_runs
from agilerl.arena.server.auth import User
from agilerl.arena.server.dependencies import Context, context, current_user
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.routes_catalog import integer
from agilerl.arena.server.runs import RunDir
from agilerl.arena.server.store import Row

public = APIRouter()
router = APIRouter()
UI = "/api/ui"
PAGE = "arena.html"
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml"}


def static_dirs() -> list[Path]:
    """Where page files are looked up: the Arena's own first, then the dashboard's."""
    return [Path(str(resources.files("agilerl.arena.server") / "ui_static")),
            Path(str(resources.files("agilerl.dashboard") / "static"))]


def _static(name: str) -> Response:
    if "/" in name or "\\" in name or name.startswith(".") or "\x00" in name:
        raise ApiError(404, "NOT_FOUND", "No such file")
    for folder in static_dirs():
        path = folder / name
        if path.suffix in _TYPES and path.is_file():
            return Response(path.read_bytes(), media_type=_TYPES[path.suffix],
                            headers={"Cache-Control": "no-cache"})
    raise ApiError(404, "NOT_FOUND", "No such file")


@public.get("/")
@public.get("/index.html")
def page() -> Response:
    return _static(PAGE)


@public.get(UI + "/server")
def server_facts(request: Request) -> Response:
    """What the sign-in page needs before it has credentials: the realm of the device login
    endpoints (nothing about users or their data)."""
    return _json({"realm": context(request).config.realm})


@public.get("/static/{name}")
def static_file(name: str) -> Response:
    return _static(name)


def _json(data: object) -> JSONResponse:
    return JSONResponse(data, headers={"Cache-Control": "no-store"})


def _owned(ctx: Context, user: User, run_id: str) -> tuple[Row, RunDir]:
    """The caller's experiment with this id; anyone else's is "not found" too."""
    row = ctx.store.experiment(int(run_id)) if run_id.isdigit() and len(run_id) < 19 else None
    if row is None or row["user_id"] != user.id:
        raise ApiError(404, "EXPERIMENT_NOT_FOUND", f"No experiment with id '{run_id[:40]}'")
    return row, ctx.scheduler.run_dir(row["id"])


def _since(value: str | None) -> int:
    return integer(value, "since", 0)


@router.get(UI + "/runs")
def runs(request: Request, user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    now = time.time()
    rows = ctx.store.experiments(user.id, None)
    return _json({"runs": [ui_runs.summary(r, ctx.scheduler.run_dir(r["id"]), now)
                           for r in rows], "roots": []})


@router.get(UI + "/runs/{run_id}")
def run_detail(run_id: str, request: Request, user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row, run = _owned(ctx, user, run_id)
    return _json({"summary": ui_runs.summary(row, run, time.time()),
                  "manifest": ui_runs.manifest_text(run, ctx.scheduler.manifest_of(row)),
                  "checkpoints": ui_runs.checkpoints(run), "files": ui_runs.files(run)})


@router.get(UI + "/runs/{run_id}/metrics")
def run_metrics(run_id: str, request: Request, since: str | None = None,
                user: User = Depends(current_user)) -> Response:
    _, run = _owned(context(request), user, run_id)
    metrics = ui_runs.metrics_of(run)
    start = _since(since)
    rel = run.metrics_file()
    return _json({"columns": metrics.columns, "rows": metrics.rows[start:], "since": start,
                  "total": len(metrics.rows),
                  "file": ui_runs.file_signature(run, rel) if rel else None})


@router.get(UI + "/runs/{run_id}/events")
def run_events(run_id: str, request: Request, since: str | None = None,
               user: User = Depends(current_user)) -> Response:
    _, run = _owned(context(request), user, run_id)
    events = ui_runs.events_of(run)
    start = _since(since)
    signature = ui_runs.file_signature(run, f"run/{ui_runs.EVENTS_FILE}")
    return _json({"events": events[start:], "since": start, "total": len(events),
                  "recorded": signature is not None, "file": signature})


@router.get(UI + "/runs/{run_id}/logs")
def run_logs(run_id: str, request: Request, offset: str | None = None,
             user: User = Depends(current_user)) -> Response:
    """The job's output from byte ``offset`` on; ``offset=-1`` (or none): its tail."""
    _, run = _owned(context(request), user, run_id)
    start = -1 if offset in (None, "", "-1") else integer(offset, "offset", 0)
    return _json(ui_runs.log_page(run, start))


@router.get(UI + "/runs/{run_id}/download/{rest:path}")
async def run_download(run_id: str, rest: str, request: Request,
                       user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row, run = _owned(ctx, user, run_id)
    if rest.startswith("checkpoints/"):
        wanted = rest.removeprefix("checkpoints/")
        # only a name the listing produced: no path of the request reaches the disk
        chosen = next((c for c in run.list_checkpoints() if c.name == wanted), None)
        if chosen is None:
            raise ApiError(404, "CHECKPOINT_NOT_FOUND", "No such checkpoint in this experiment")
        try:
            data = await run_in_threadpool(run.checkpoint_archive, chosen)
        except OSError:
            raise ApiError(409, "CHECKPOINT_CHANGED", "The checkpoint changed while it was"
                           " packed; try again") from None
        return Response(data, media_type="application/gzip", headers=_attachment(
            f"{row['name']}_{chosen.name}.tar.gz"))
    if rest not in ui_runs.DOWNLOADABLE:
        raise ApiError(404, "NOT_FOUND", "No such file in this experiment")
    try:
        size, chunks = ui_runs.stream_file(run, f"run/{rest}")
    except OSError:
        raise ApiError(404, "NOT_FOUND", "No such file in this experiment") from None
    kind = "application/octet-stream" if rest.endswith(".pt") else "text/plain; charset=utf-8"
    return StreamingResponse(chunks, media_type=kind, headers={
        "Content-Length": str(size), **_attachment(f"{row['name']}_{rest}")})


def _attachment(name: str) -> dict[str, str]:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return {"Content-Disposition": f'attachment; filename="{safe}"'}


@router.get(UI + "/environments")
def environments(request: Request, user: User = Depends(current_user)) -> Response:
    """The caller's uploaded environment versions, with their descriptions and states."""
    catalog = context(request).catalog
    rows = catalog.environments(user.id) if catalog is not None else []
    keys = ("name", "version", "description", "state", "entrypoint", "error", "created_at",
            "updated_at")
    return _json({"environments": [{**{k: r[k] for k in keys}, "validated": bool(r["validated"]),
                                    "profiled": bool(r["profiled"])} for r in rows],
                  "custom_code": context(request).config.allow_custom_code})
