"""Environment routes (spec arena-api §1.5): built-in ids and per-user uploads.

Uploading, validating, profiling and duplicating run (or prepare to run) user code, so
they answer 403 unless the server was started with ``--allow-custom-code``; listing,
lookups and deletion work either way. Every lookup is scoped to the caller.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import TypedDict

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from agilerl.arena.server import env_jobs, environments, quota
from agilerl.arena.server.auth import User
from agilerl.arena.server.catalog import LATEST, Catalog, Row, check_name
from agilerl.arena.server.dependencies import Context, context, current_user, ok
from agilerl.arena.server.env_archive import ArchiveLimits, unpack
from agilerl.arena.server.env_entrypoints import find_entrypoints
from agilerl.arena.server.env_install import copy_venv
from agilerl.arena.server.env_pipeline import (
    EnvService,
    choose_entrypoint,
    exclusive,
    install_stage,
    profiling_stage,
    validation_stage,
)
from agilerl.arena.server.env_upload import check_entrypoint, read_upload
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.events import NDJSON, event
from agilerl.arena.server.routes_catalog import blank, flag

router = APIRouter()
ENVS = "/api/cli/v1/environments"


_SERVICE_LOCK = threading.Lock()


def _service(request: Request) -> EnvService:
    """The app's one :class:`EnvService` (its slots and busy set are shared)."""
    state = request.app.state
    with _SERVICE_LOCK:
        found: EnvService | None = getattr(state, "env_service", None)
        if found is None:
            ctx = context(request)
            assert ctx.catalog is not None
            found = state.env_service = EnvService(ctx.config, ctx.catalog)
    return found


def _catalog(request: Request) -> Catalog:
    catalog = context(request).catalog
    assert catalog is not None
    return catalog


def require_custom_code(ctx: Context) -> None:
    if not ctx.config.allow_custom_code:
        raise ApiError(403, "CUSTOM_CODE_DISABLED",
                       "Uploaded environments run your code on this server, which was not"
                       " started with --allow-custom-code. Ask its operator to restart it"
                       " with `arena-server serve --allow-custom-code ...` (and only for"
                       " users trusted to run code there).")


def _version(value: object) -> str | None:
    return None if value in LATEST else check_name(value, "version")


def _find(ctx: Context, user: User, name: object, version: object) -> Row:
    env_name = check_name(name, "name")
    wanted = _version(version)
    assert ctx.catalog is not None
    row = ctx.catalog.environment(user.id, env_name, wanted)
    if row is None:
        what = f"Environment '{env_name}'" + (f" version '{wanted}'" if wanted else "")
        raise ApiError(404, "ENVIRONMENT_NOT_FOUND", f"{what} not found")
    return row


_DISCONNECT_POLL_S = 0.5


async def _drive(request: Request, cancel: threading.Event,
                 lines: Iterator[bytes]) -> AsyncIterator[bytes]:
    """``lines`` (blocking: each step runs in a worker thread), watching the client while
    a step runs: when it has gone, ``cancel`` is set, which stops the pip or check process
    under way, and the stream ends."""
    try:
        while True:
            step = asyncio.ensure_future(run_in_threadpool(next, lines, None))
            while not step.done():
                await asyncio.wait({step}, timeout=_DISCONNECT_POLL_S)
                if not step.done() and await request.is_disconnected():
                    return
            chunk = step.result()
            if chunk is None:
                return
            yield chunk
    finally:
        cancel.set()


def _stream(request: Request, cancel: threading.Event,
            lines: Iterator[bytes]) -> StreamingResponse:
    return StreamingResponse(_drive(request, cancel, lines), media_type=NDJSON,
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


# ---- catalogue ----------------------------------------------------------------------------


@router.get(ENVS)
def list_environments(request: Request, name: str | None = None,
                      include_arena: str | None = None,
                      user: User = Depends(current_user)) -> Response:
    wanted = blank(name)
    out: dict[str, dict[str, dict[str, bool]]] = {}
    for row in _catalog(request).environments(user.id):
        if wanted and wanted.lower() not in row["name"].lower():
            continue
        out.setdefault(row["name"], {})[row["version"]] = {
            "validated": bool(row["validated"]), "profiled": bool(row["profiled"])}
    if flag(include_arena, "include_arena"):
        out = {**environments.catalogue(wanted), **out}
    return ok(out)


@router.get(ENVS + "/exists")
def environment_exists(request: Request, name: str, version: str | None = None,
                       user: User = Depends(current_user)) -> Response:
    wanted = None if version in LATEST else version
    if _catalog(request).environment(user.id, name, wanted) is not None:
        return ok({"exists": True})
    if wanted not in (None, environments.BUILTIN_VERSION):
        return ok({"exists": False})
    return ok({"exists": environments.exists(name)})


@router.get(ENVS + "/entrypoints")
def environment_entrypoints(request: Request, name: str, version: str | None = None,
                            user: User = Depends(current_user)) -> Response:
    row = _catalog(request).environment(user.id, name, None if version in LATEST else version)
    if row is not None:
        return ok(row["entrypoints"])
    entry = environments.gym_ids().get(name)
    if entry is None:
        raise ApiError(404, "ENVIRONMENT_NOT_FOUND", f"Environment '{name}' not found")
    return ok([entry])


# ---- create-and-validate -------------------------------------------------------------------


class _Created(TypedDict):
    """What the upload stage hands to the rest of create-and-validate."""

    do_rollouts: bool
    entrypoint: str | None
    files: int
    bytes: int


async def _upload(request: Request, ctx: Context, svc: EnvService,
                  user: User) -> tuple[Row, _Created]:
    """Check and store the multipart upload: the ``upload`` stage, answered by status code.
    The new version is held (:meth:`EnvService.acquire`) when this returns."""
    up = await read_upload(await request.form())
    quota.check(ctx.config, ctx.store, user.id, "Upload refused", adding=len(up.archive))
    name, version = up.name, up.version
    assert ctx.catalog is not None
    svc.acquire(user.id, name, version)
    try:
        existing = ctx.catalog.environment(user.id, name, version)
        if existing is not None:
            if existing["validated"]:
                raise ApiError(409, "ENVIRONMENT_EXISTS",
                               f"Environment '{name}' version '{version}' is already"
                               " validated; upload the new source as another --version"
                               " (or delete it)")
            svc.remove_files(existing)  # a failed upload may be replaced
            ctx.catalog.delete_environment(existing["id"])
        root = ctx.catalog.env_dir(user.id, name, version)
        shutil.rmtree(root, ignore_errors=True)
        limits = ArchiveLimits(ctx.config.env_max_source_files, ctx.config.env_max_source_bytes)
        files = unpack(up.archive, root / "source", limits)
        row = ctx.catalog.add_environment(user.id, {
            "name": name, "version": version, "description": up.description,
            "multi_agent": int(up.multi_agent), "entrypoint": up.entrypoint,
            "entrypoints": find_entrypoints(root / "source"), "env_config": up.env_config,
            "requirements": up.requirements})
    except BaseException:
        svc.release(user.id, name, version)
        raise
    return row, {"do_rollouts": up.do_rollouts, "entrypoint": up.entrypoint,
                 "files": len(files), "bytes": len(up.archive)}


def _create_stream(svc: EnvService, row: Row, options: _Created, started: float,
                   cancel: threading.Event) -> Iterator[bytes]:
    yield event("status", "upload", "completed",
                f"Stored {row['name']}:{row['version']} ({options['files']} files)",
                {"name": row["name"], "version": row["version"], "files": options["files"],
                 "entrypoints": row["entrypoints"]})
    if not (yield from install_stage(svc, row, cancel)):
        return
    entrypoint = yield from choose_entrypoint(svc, row, options["entrypoint"])
    if entrypoint is None:
        return
    detail = yield from validation_stage(svc, row, entrypoint, options["do_rollouts"], started,
                                         cancel)
    if detail is None:
        return
    metrics = yield from profiling_stage(svc, row, entrypoint, cancel)
    summary = {**detail, "profiled": metrics is not None, "profile": metrics,
               "total_s": round(time.monotonic() - started, 3)}
    yield event("status", "profiling", "completed",
                f"Environment {row['name']}:{row['version']} is registered and validated",
                summary)


@router.post(ENVS + "/create-and-validate")
async def create_and_validate(request: Request,
                              user: User = Depends(current_user)) -> StreamingResponse:
    started = time.monotonic()
    ctx = context(request)
    require_custom_code(ctx)
    svc = _service(request)
    row, options = await _upload(request, ctx, svc, user)  # acquires the new version
    cancel = threading.Event()
    return _stream(request, cancel, exclusive(svc, row, "upload",
                                              _create_stream(svc, row, options, started, cancel)))


# ---- validate, profile ----------------------------------------------------------------


class ValidateRequest(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    version: str | None = None
    do_rollouts: bool = False
    entrypoint: str | None = None


class VersionRequest(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    version: str | None = None


def _validate_stream(svc: EnvService, row: Row, body: ValidateRequest,
                     cancel: threading.Event) -> Iterator[bytes]:
    started = time.monotonic()
    installed = svc.paths(row).is_installed()  # else an earlier install failed
    if not installed and not (yield from install_stage(svc, row, cancel)):
        return
    entrypoint = yield from choose_entrypoint(svc, row, body.entrypoint)
    if entrypoint is not None:
        yield from validation_stage(svc, row, entrypoint, body.do_rollouts, started, cancel)


@router.post(ENVS + "/validate")
def validate(body: ValidateRequest, request: Request,
             user: User = Depends(current_user)) -> StreamingResponse:
    ctx = context(request)
    require_custom_code(ctx)
    row = _find(ctx, user, body.name, body.version)
    check_entrypoint(body.entrypoint)
    quota.check(ctx.config, ctx.store, user.id, "Validation refused")  # may reinstall
    svc = _service(request)
    svc.acquire(user.id, row["name"], row["version"])
    cancel = threading.Event()
    return _stream(request, cancel, exclusive(svc, row, "validation",
                                              _validate_stream(svc, row, body, cancel)))


def _profile_stream(svc: EnvService, row: Row, cancel: threading.Event) -> Iterator[bytes]:
    metrics = yield from profiling_stage(svc, row, str(row["entrypoint"]), cancel)
    if metrics is None:
        yield event("status", "profiling", "failed", "Profiling failed",
                    {"error_code": "PROF_ERR", "name": row["name"], "version": row["version"]})
        return
    yield event("status", "profiling", "completed",
                f"Profiled {row['name']}:{row['version']}", metrics)


@router.post(ENVS + "/profile")
def profile(body: VersionRequest, request: Request,
            user: User = Depends(current_user)) -> StreamingResponse:
    ctx = context(request)
    require_custom_code(ctx)
    row = _find(ctx, user, body.name, body.version)
    if not row["validated"]:
        raise env_jobs.not_validated(row["name"], row["version"])
    svc = _service(request)
    svc.acquire(user.id, row["name"], row["version"])
    cancel = threading.Event()
    return _stream(request, cancel, exclusive(svc, row, "profiling",
                                              _profile_stream(svc, row, cancel)))


# ---- delete, duplicate -------------------------------------------------------------------


@router.delete(ENVS + "/delete")
def delete(body: VersionRequest, request: Request,
           user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    assert ctx.catalog is not None
    name = check_name(body.name, "name")
    wanted = _version(body.version)
    rows = ctx.catalog.environments(user.id, name)
    rows = [r for r in rows if wanted in (None, r["version"])]
    if not rows:
        what = f"Environment '{name}'" + (f" version '{wanted}'" if wanted else "")
        raise ApiError(404, "ENVIRONMENT_NOT_FOUND", f"{what} not found")
    using = env_jobs.active_users_of(ctx.store, ctx.config.data_dir, user.id, name,
                                     wanted)
    if using:
        raise ApiError(409, "ENVIRONMENT_IN_USE",
                       f"Environment '{name}' is used by waiting or running experiment(s):"
                       f" {', '.join(using)}; stop them first", experiments=using)
    svc = _service(request)
    for row in rows:
        with svc.claim(user.id, name, row["version"]):
            ctx.catalog.delete_environment(row["id"])
            svc.remove_files(row)
    versions = [r["version"] for r in rows]
    return ok({"name": name, "version": wanted, "versions": versions, "deleted": True})


class DuplicateRequest(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    new_version_name: str = Field(min_length=1, max_length=128)
    version: str | None = None


@router.post(ENVS + "/duplicate")
def duplicate(body: DuplicateRequest, request: Request,
              user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    require_custom_code(ctx)
    assert ctx.catalog is not None
    source = _find(ctx, user, body.name, body.version)
    new_version = check_name(body.new_version_name, "new_version_name")
    quota.check(ctx.config, ctx.store, user.id, "Copy refused")
    svc = _service(request)
    copied = {key: source[key] for key in ("name", "description", "multi_agent", "entrypoint",
                                           "entrypoints", "env_config", "requirements")}
    with svc.claim(user.id, source["name"], source["version"]):
        row = ctx.catalog.add_environment(user.id, {**copied, "version": new_version})
        old, new = svc.paths(source), svc.paths(row)
        try:
            shutil.copytree(old.source, new.source, symlinks=True)  # never a link's target
            if old.venv.is_dir():
                copy_venv(old.venv, new.venv)
        except OSError as exc:
            ctx.catalog.delete_environment(row["id"])
            svc.remove_files(row)
            raise ApiError(500, "STORAGE_ERROR", f"Could not copy the environment: {exc}"
                           ) from None
        state = {k: source[k] for k in ("state", "validated", "profiled", "profile", "error")}
        ctx.catalog.update_environment(row["id"], **state)
    return ok({"name": source["name"], "version": new_version,
               "source_version": source["version"], "validated": bool(source["validated"])},
              status=201)
