"""Turning a submit request into a recorded, queued experiment (spec §9.4, first row)."""

from __future__ import annotations

import json
import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from fastapi import Request
from starlette.datastructures import UploadFile

from agilerl.arena.server import (
    dataset_jobs,
    env_jobs,
    environments,
    nofollow,
    policy,
    quota,
    states,
)
from agilerl.arena.server.auth import User
from agilerl.arena.server.config import DEFAULT_RESOURCE_ID
from agilerl.arena.server.dependencies import Context
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.jsondepth import check_json_depth
from agilerl.arena.server.store import Row

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

EXPERIMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DEFAULT_PROJECT = "default"
MAX_IDEMPOTENCY_KEY = 200
MAX_FILE_NAME = 255
GENERATED_NAME_TRIES = 5


@dataclass
class SubmitRequest:
    #: the submitted manifest as parsed JSON (checked to be an object by validation).
    manifest: object
    resource_id: str | None = None
    num_nodes: int | None = None
    project: str | None = None
    experiment_name: str | None = None
    #: the name of the user's manifest file (no folder), which the job's log cites.
    manifest_file: str | None = None
    reward_file: bytes | None = None
    warnings: list[str] = field(default_factory=list)
    #: the uploaded environment the manifest names (:mod:`.env_jobs`), once checked.
    custom_env: env_jobs.Binding | None = None
    #: the uploaded dataset the manifest names (:mod:`.dataset_jobs`), copied at submit.
    dataset_file: Path | None = None


def _bad(message: str, loc: str) -> ApiError:
    return ApiError(422, "INVALID_REQUEST", message, errors=[f"{loc}: {message}"])


def _text(value: object, loc: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _bad("expected a string", loc)
    return str(value).strip() or None


def _file_name(value: object) -> str | None:
    """The client's manifest file name: its last part, printable, at most 255 characters."""
    text = _text(value, "manifest_file")
    if text is None:
        return None
    name = text.replace("\\", "/").rpartition("/")[2]
    if not name or len(name) > MAX_FILE_NAME or not name.isprintable():
        raise _bad("must be a file name of at most 255 printable characters", "manifest_file")
    return name


def _nodes(value: object) -> int | None:
    if value is None or value == "":
        return None
    try:
        if not isinstance(value, str | int | float):  # int() refuses any other JSON value
            raise TypeError(value)
        nodes = int(value)
    except (TypeError, ValueError):
        raise _bad("expected an integer", "num_nodes") from None
    if isinstance(value, bool) or nodes < 1:
        raise _bad("must be a positive integer", "num_nodes")
    return nodes


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    # 1e999 reads as inf: no manifest field takes it, and the run folder is strict JSON.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a number")
    return value


async def parse(request: Request) -> SubmitRequest:
    """Read a JSON or multipart submit body (the reference client sends both)."""
    ctype = request.headers.get("content-type", "")
    reward: bytes | None = None
    if ctype.startswith("multipart/form-data"):
        form = await request.form()
        texts = {k: v for k, v in form.items() if isinstance(v, str)}
        body: dict[str, object] = dict(texts)
        upload = form.get("reward_file")
        if isinstance(upload, UploadFile):
            reward = await upload.read()
        check_json_depth(texts.get("manifest", ""), "The 'manifest' form field")
        try:
            body["manifest"] = json.loads(texts.get("manifest", ""), parse_constant=_no_constant,
                                          parse_float=_finite)
        except ValueError:
            raise _bad("the 'manifest' form field must be a JSON object", "manifest") from None
    else:
        raw = await request.body()
        check_json_depth(raw)  # also checked by the app for JSON content types
        try:
            body = json.loads(raw or b"null", parse_constant=_no_constant,
                              parse_float=_finite)
        except ValueError as exc:
            raise ApiError(400, "INVALID_JSON", f"Request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict) or "manifest" not in body:
            raise _bad("the body must be an object with a 'manifest' field", "manifest")
    return SubmitRequest(
        manifest=body.get("manifest"),
        resource_id=_text(body.get("resource_id"), "resource_id"),
        num_nodes=_nodes(body.get("num_nodes")),
        project=_text(body.get("project"), "project"),
        experiment_name=_text(body.get("experiment_name"), "experiment_name"),
        manifest_file=_file_name(body.get("manifest_file")),
        reward_file=reward,
    )


def _resource(ctx: Context, req: SubmitRequest) -> tuple[str, int]:
    """The tier and node count a job runs on; ``num_nodes`` the server cannot honour is
    refused (422) rather than silently run on fewer nodes."""
    nodes = req.num_nodes or 1
    cluster = ctx.scheduler.cluster
    if cluster is None:
        tiers = [DEFAULT_RESOURCE_ID]
        if nodes > 1:
            raise _bad(f"num_nodes={nodes}: this server runs each job on one machine; it can"
                       " run a job across nodes only when started with --ray-address",
                       "num_nodes")
    else:
        from agilerl.arena.server.cluster import ClusterUnavailable

        try:
            offered = cluster.tiers()
        except ClusterUnavailable as exc:
            raise ApiError(503, "CLUSTER_UNAVAILABLE", str(exc)) from None
        tiers = list(offered)
        alive = sum(int(t["nodes"]) for t in offered.values())
        if nodes > alive:
            raise _bad(f"num_nodes={nodes}: the Ray cluster at {cluster.address} has only"
                       f" {alive} alive node{'s' if alive != 1 else ''}", "num_nodes")
        if not tiers:
            raise ApiError(503, "CLUSTER_UNAVAILABLE",
                           f"the Ray cluster at {cluster.address} has no alive node")
    resource = req.resource_id or tiers[0]
    if resource not in tiers:
        req.warnings.append(f"Resource '{resource}' is not offered by this server;"
                            f" running on '{tiers[0]}'")
        resource = tiers[0]
    return resource, nodes


def _name(req: SubmitRequest, manifest: Mapping[str, object]) -> str:
    if req.experiment_name is not None:
        if not EXPERIMENT_NAME.match(req.experiment_name):
            raise _bad("use letters, digits, '.', '_' or '-' (at most 128, no spaces)",
                       "experiment_name")
        return req.experiment_name
    algo = str(policy.section(manifest, "algorithm").get("name", "job"))
    env = str(policy.section(manifest, "environment").get("name", "env"))
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{algo}-{env}").strip("-._")[:100] or "job"
    return f"{stem}-{secrets.token_hex(4)}".lower()


def _check(ctx: Context, req: SubmitRequest, user_id: int) -> tuple[JsonObject, int, int]:
    raw = req.manifest
    if isinstance(raw, dict):  # refuse what was asked for, even if validation would drop it
        policy.check_custom_code(raw, ctx.config.allow_custom_code)
        policy.check_paths(raw)
    validated, warnings = policy.validate_manifest(raw)
    assert isinstance(raw, dict)  # validation refuses anything else
    req.warnings.extend(warnings)
    manifest = policy.run_manifest(raw, validated)
    policy.check_custom_code(manifest, ctx.config.allow_custom_code)
    if req.reward_file is not None and not ctx.config.allow_custom_code:
        raise ApiError(422, "CUSTOM_CODE_DISABLED",
                       "A reward file is code; this server was not started with"
                       " --allow-custom-code", errors=["reward_file: refused (runs custom code)"])
    policy.check_paths(manifest)
    work = policy.check_limits(manifest, ctx.config)
    max_steps, pop_size = work.max_steps, work.pop_size
    if ctx.catalog is not None:
        req.custom_env = env_jobs.resolve(ctx.catalog, user_id, manifest,
                                          ctx.config.allow_custom_code)
        req.dataset_file = dataset_jobs.resolve(ctx.catalog, user_id, manifest)
    missing = environments.missing_from_manifest(manifest)
    if missing is not None:
        raise ApiError(404, "ENVIRONMENT_NOT_FOUND", f"Environment '{missing}' not found",
                       errors=[f"environment.name: '{missing}' is not a registered"
                               " Gymnasium id on this server"])
    return manifest, max_steps, pop_size


def _insert(ctx: Context, req: SubmitRequest, manifest: Mapping[str, object],
            fields: dict[str, object]) -> tuple[Row, bool]:
    """Insert; a generated name that happens to be taken is drawn again."""
    for _ in range(GENERATED_NAME_TRIES - 1):
        try:
            return ctx.store.insert_experiment(
                fields, max_active=ctx.config.max_active_jobs_per_user)
        except ApiError as err:
            if err.code != "NAME_CONFLICT" or req.experiment_name is not None:
                raise
            fields["name"] = _name(req, manifest)
    return ctx.store.insert_experiment(fields, max_active=ctx.config.max_active_jobs_per_user)


def submit(ctx: Context, user: User, req: SubmitRequest,
           idempotency_key: str | None) -> tuple[Row, bool]:
    """Validate, record (PENDING), write the run folder, queue. Returns (row, created)."""
    if idempotency_key is not None and len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
        raise ApiError(400, "INVALID_IDEMPOTENCY_KEY",
                       f"Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY} characters")
    manifest, max_steps, pop_size = _check(ctx, req, user.id)
    quota.check(ctx.config, ctx.store, user.id, "Submission refused")
    if req.project is None:
        project = ctx.store.ensure_project(user.id, DEFAULT_PROJECT)
    else:
        found = ctx.store.project(user.id, req.project)
        if found is None:
            raise ApiError(404, "PROJECT_NOT_FOUND", f"Project '{req.project}' not found")
        project = found
    resource, nodes = _resource(ctx, req)
    fields: dict[str, object] = {
        "user_id": user.id, "project_id": project["id"], "name": _name(req, manifest),
        "algorithm": policy.section(manifest, "algorithm").get("name"),
        "environment": policy.section(manifest, "environment").get("name"),
        "resource_id": resource, "num_nodes": nodes, "max_steps": max_steps,
        "pop_size": pop_size, "idempotency_key": idempotency_key,
        # what every launch is built from: the server's copies, never the job's files
        "manifest": json.dumps(manifest, allow_nan=False),
        "custom_env": env_jobs.binding_json(req.custom_env),
        "manifest_file": req.manifest_file,
    }
    row, created = _insert(ctx, req, manifest, fields)
    if not created:
        return row, False
    run = ctx.scheduler.run_dir(row["id"])
    try:
        run.create(manifest)
        if req.reward_file is not None:
            nofollow.write_atomic(run.root, "reward.py", req.reward_file)
        if req.dataset_file is not None:
            dataset_jobs.copy_into(run.root, req.dataset_file)
    except OSError as exc:
        ctx.store.transition(row["id"], states.FAILED, reason="could not write run folder",
                             error=f"Could not write the experiment folder: {exc}")
        raise ApiError(500, "STORAGE_ERROR", "Could not write the experiment folder") from None
    # only_from: a stop that arrived while the folder was written must win.
    ctx.store.transition(row["id"], states.QUEUED, reason="accepted",
                         only_from=(states.PENDING,))
    ctx.scheduler.wake()
    fresh = ctx.store.experiment(row["id"])
    return (fresh or row), True
