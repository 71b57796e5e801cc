"""The ASGI application: wiring, error rendering, body limits and authentication."""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agilerl.arena.server.auth import Authenticator
from agilerl.arena.server.catalog import Catalog
from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.dependencies import Context, current_user
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.jsondepth import check_json_depth
from agilerl.arena.server.scheduler import Scheduler
from agilerl.arena.server.store import Store

log = logging.getLogger(__name__)


def error_response(err: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


class BodyLimit:
    """413 for request bodies over the limit: declared lengths up front, chunked as counted."""

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app = app
        self.config = config

    def _limit(self, scope: Scope) -> int:
        headers = dict(scope.get("headers") or [])
        ctype = headers.get(b"content-type", b"").decode("latin-1").lower()
        if ctype.startswith("multipart/"):
            return self.config.max_upload_bytes
        return self.config.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _drain(receive, int(declared), limit)
            await JSONResponse(_too_large(limit).body(), status_code=413)(scope, receive, send)
            return
        seen = 0

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    # An HTTPException passes through FastAPI's body parsing unchanged.
                    raise StarletteHTTPException(413, _too_large(limit).message)
            return message

        await self.app(scope, counting_receive, send)


class SecurityHeaders:
    """The dashboard's security headers on every response (pages, scripts and JSON alike):
    a Content-Security-Policy allowing only this origin's scripts and styles (no inline
    script, no ``eval``), no framing, no content-type sniffing, no referrer."""

    def __init__(self, app: ASGIApp) -> None:
        from agilerl.dashboard.api import SECURITY_HEADERS

        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.headers if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class JsonDepthLimit:
    """400 ``INVALID_JSON`` for a JSON body nested deeper than ``MAX_JSON_DEPTH``, before any
    route parses it (the parser would recurse once per level). Runs inside
    :class:`BodyLimit`, so the body it reads whole is already bounded."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        ctype = headers.get(b"content-type", b"").decode("latin-1").lower()
        if "json" not in ctype:
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            try:
                message = await receive()
            except StarletteHTTPException as exc:  # BodyLimit's streamed 413
                await error_response(_too_large_error(exc))(scope, receive, send)
                return
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)  # client went away
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            check_json_depth(body)
        except ApiError as err:
            await error_response(err)(scope, receive, send)
            return
        await self.app(scope, _replay([{"type": "http.request", "body": body,
                                        "more_body": False}], receive), send)


def _too_large_error(exc: StarletteHTTPException) -> ApiError:
    return ApiError(exc.status_code, "PAYLOAD_TOO_LARGE", str(exc.detail))


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    """A ``receive`` that hands out ``messages`` first, then defers to ``then``."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "PAYLOAD_TOO_LARGE",
                    f"Request body exceeds this server's limit of {limit} bytes", limit=limit)


async def _drain(receive: Receive, declared: int, limit: int) -> None:
    """Read (and drop) a modestly oversized body so the client gets to read the 413."""
    if declared > 8 * limit + (1 << 20):
        return  # far too large: answer at once and let the connection close
    more = True
    while more:
        message = await receive()
        more = message["type"] == "http.request" and message.get("more_body", False)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "query"))
            errors.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
        return error_response(ApiError(422, "INVALID_REQUEST",
                                       "The request is invalid: " + "; ".join(errors),
                                       errors=errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI answers 400 only when a JSON body does not parse.
        codes = {400: "INVALID_JSON", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED",
                 413: "PAYLOAD_TOO_LARGE"}
        return error_response(ApiError(exc.status_code, codes.get(exc.status_code, "HTTP_ERROR"),
                                       str(exc.detail)))

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        # uvicorn logs the traceback; the client gets no internals.
        return error_response(ApiError(500, "INTERNAL", "Internal server error"))


class DataDirBusy(RuntimeError):
    """Another server process already serves this data folder."""


def _lock_data_dir(config: ServerConfig) -> int:
    """Hold an exclusive lock for this process's lifetime: two schedulers on one folder
    would each take the other's running jobs for orphans of a crash."""
    fd = os.open(config.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirBusy(f"another arena-server is already using {config.data_dir}") from None
    return fd


def create_app(config: ServerConfig) -> FastAPI:
    """Build the server; the scheduler starts with the app's lifespan.

    :raises DataDirBusy: when another server process holds the data folder.
    :raises ClusterUnavailable: when ``config.ray_address`` names no reachable Ray cluster.
    """
    from agilerl.arena.server import (
        routes_auth,
        routes_catalog,
        routes_datasets,
        routes_environments,
        routes_experiments,
        routes_ui,
    )

    config.ensure_dirs()
    lock_fd = _lock_data_dir(config)
    store = Store(config.db_path)
    scheduler = Scheduler(store, config)
    if scheduler.cluster is not None:
        try:
            scheduler.cluster.connect()
        except BaseException:
            store.close()
            os.close(lock_fd)
            raise
    ctx = Context(config, store, Authenticator(store, config), scheduler,
                  Catalog(config.data_dir))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx.scheduler.start()
        try:
            yield
        finally:
            env_service = getattr(app.state, "env_service", None)
            if env_service is not None:  # uploads being checked (:mod:`.env_pipeline`)
                env_service.shutdown()
            ctx.submitter.shutdown(wait=True)
            ctx.scheduler.shutdown()
            if ctx.scheduler.cluster is not None:
                ctx.scheduler.cluster.close()
            store.close()
            if ctx.catalog is not None:
                ctx.catalog.close()
            os.close(lock_fd)  # releases the folder lock

    app = FastAPI(title="Arena-compatible server (agilerl)", lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.ctx = ctx
    _install_error_handlers(app)

    @app.get("/health")
    def health() -> dict[str, object]:
        return {"ok": True, "data": {"status": "ok"}}

    app.include_router(routes_auth.public)
    app.include_router(routes_ui.public)  # the page shell and its scripts: no user data
    guarded = [Depends(current_user)]
    app.include_router(routes_auth.api, dependencies=guarded)
    app.include_router(routes_catalog.router, dependencies=guarded)
    app.include_router(routes_experiments.router, dependencies=guarded)
    app.include_router(routes_environments.router, dependencies=guarded)
    app.include_router(routes_datasets.router, dependencies=guarded)
    app.include_router(routes_ui.router, dependencies=guarded)
    app.include_router(routes_catalog.fallback, dependencies=guarded)
    app.add_middleware(JsonDepthLimit)
    app.add_middleware(BodyLimit, config=config)
    app.add_middleware(SecurityHeaders)  # added last: runs first, so every answer has them
    return app
