"""Experiment routes: submit, list, status, logs, stop, resume, checkpoints, metrics."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from agilerl.arena.server import policy, quota, states, submission
from agilerl.arena.server.auth import User
from agilerl.arena.server.dependencies import Context, context, current_user, ok
from agilerl.arena.server.errors import ApiError, invalid_state
from agilerl.arena.server.events import NDJSON
from agilerl.arena.server.events import event as _event
from agilerl.arena.server.routes_catalog import blank, flag, integer
from agilerl.arena.server.runs import MetricsUnreadable, RunDir, whole_count
from agilerl.arena.server.store import Row

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonValue

router = APIRouter()
JOBS = "/api/cli/v1/experiments/jobs"
FOLLOW_POLL_S = 0.05
STATE_EVERY = 10  # idle polls between state checks (0.5 s)
MAX_PREVIEW_ROWS = 1_000_000


def public_row(ctx: Context, row: Row) -> dict[str, object]:
    """The experiment row of spec §9.4 (list/status).

    ``steps`` counts per agent, like ``max_steps`` (the trainer logs population totals).
    """
    steps = row["steps"]
    if row["state"] in states.LIVE:
        steps = max(steps, ctx.scheduler.live_steps(row["id"]) or 0)
    return {key: row[key] for key in (
        "id", "name", "project", "state", "algorithm", "environment", "resource_id",
        "num_nodes", "created_at", "started_at", "finished_at")} | {
        "steps": steps, "max_steps": row["max_steps"], "pop_size": row["pop_size"],
        "attempt": row["attempt"]}


def find(ctx: Context, user: User, name: str | None, project: str | None = None) -> Row:
    """The caller's experiment called ``name`` (or with that numeric id)."""
    name = blank(name.strip() if name else name)
    if name is None:
        raise ApiError(422, "INVALID_REQUEST", "experiment_name is required",
                       errors=["experiment_name: required"])
    project_id = None
    if blank(project) is not None:
        found = ctx.store.project(user.id, str(project))
        if found is None:
            raise ApiError(404, "PROJECT_NOT_FOUND", f"Project '{project}' not found")
        project_id = found["id"]
    rows = ctx.store.find_experiments(user.id, name, project_id)
    if not rows and name.isdigit():
        by_id = ctx.store.experiment(int(name))
        if by_id is not None and by_id["user_id"] == user.id:
            rows = [by_id]
    if not rows:
        raise ApiError(404, "EXPERIMENT_NOT_FOUND", f"Experiment '{name}' not found")
    if len(rows) > 1:
        raise ApiError(409, "AMBIGUOUS_EXPERIMENT",
                       f"Several projects hold an experiment '{name}'; pass project",
                       projects=[r["project"] for r in rows])
    return rows[0]


# ---- submit and listing --------------------------------------------------------------


@router.post(JOBS + "/submit")
async def submit(request: Request, user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    req = await submission.parse(request)
    key = blank(request.headers.get("idempotency-key"))
    row, created = await ctx.submit_call(submission.submit, ctx, user, req, key)
    lines = [_event("status", "validation", "running", "Validating manifest")]
    lines += [_event("warning", "validation", "running", w, level="secondary-info")
              for w in req.warnings]
    lines.append(_event("status", "validation", "completed", "Manifest is valid"))
    message = "Job submitted" if created else "Job already submitted (same Idempotency-Key)"
    detail = {"accepted": True, "experiment_id": row["id"], "experiment_name": row["name"],
              "project": row["project"], "state": row["state"],
              "resource_id": row["resource_id"], "num_nodes": row["num_nodes"],
              "created": created}
    lines.append(_event("status", "submission", "completed", message, detail))
    return Response(b"".join(lines), media_type=NDJSON)


@router.get("/api/cli/v1/experiments/list")
def list_experiments(request: Request, project: str | None = None,
                     user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    project_id = None
    if blank(project) is not None:
        found = ctx.store.project(user.id, str(project))
        if found is None:
            raise ApiError(404, "PROJECT_NOT_FOUND", f"Project '{project}' not found")
        project_id = found["id"]
    return ok([public_row(ctx, r) for r in ctx.store.experiments(user.id, project_id)])


@router.get(JOBS + "/status")
def status(request: Request, experiment_name: str | None = None, project: str | None = None,
           user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row = find(ctx, user, experiment_name, project)
    latest = ctx.scheduler.run_dir(row["id"]).latest_checkpoint()
    return ok(public_row(ctx, row) | {
        "error": row["error"],
        "latest_checkpoint": latest.row() if latest else None,
        "transitions": ctx.store.transitions(row["id"]),
    })


# ---- logs ------------------------------------------------------------------------------


def _log_line(entry: Mapping[str, JsonValue]) -> bytes:
    detail = {"seq": entry.get("seq"), "ts": entry.get("ts"), "stream": entry.get("stream")}
    return _event("log", "training", "running", str(entry.get("message", "")), detail)


def _final(row: Row, follow: bool) -> bytes:
    detail = {"state": row["state"], "experiment_name": row["name"], "steps": row["steps"]}
    if row["error"]:
        detail["error"] = row["error"]
    if follow and row["state"] == states.FAILED:
        detail["error_code"] = "JOB_FAILED"
        return _event("status", "training", "failed", row["error"] or "Job failed", detail)
    return _event("status", "training", "completed", f"Job is {row['state']}", detail)


def _lines(entries: Sequence[Mapping[str, JsonValue]], since: int) -> bytes:
    """The log events of ``entries`` after ``since``. The job may rewrite its log: a line
    whose ``seq`` is not a whole number >= 0 (``Infinity``, a float, a string) is passed over
    as the writer passes it over, instead of ending the stream with an error."""
    out = []
    for entry in entries:
        seq = whole_count(entry.get("seq", 0))
        if seq is not None and seq > since:
            out.append(_log_line(entry))
    return b"".join(out)


async def _drain(run: RunDir, offset: int, since: int) -> AsyncIterator[bytes]:
    """Everything left in the log from ``offset`` (it may be more than one read)."""
    while True:
        entries, offset = await run_in_threadpool(run.read_logs, offset)
        if not entries:
            return
        chunk = _lines(entries, since)
        if chunk:
            yield chunk


async def _log_stream(ctx: Context, row: Row, follow: bool, since: int) -> AsyncIterator[bytes]:
    """The backlog, then (with ``follow``) new lines as they land, then one terminal event.

    Following polls the log file every ``FOLLOW_POLL_S`` (a cheap read from the last
    offset) and re-reads the job's state every ``STATE_EVERY`` idle polls.
    """
    run = ctx.scheduler.run_dir(row["id"])
    if not follow:
        async for piece in _drain(run, 0, since):
            yield piece
        current: Row | None = await run_in_threadpool(ctx.store.experiment, row["id"])
        yield _final(current or row, False)
        return
    offset, idle = 0, 0
    while True:
        entries, offset = await run_in_threadpool(run.read_logs, offset)
        if entries:
            chunk = _lines(entries, since)
            if chunk:
                yield chunk
            continue
        idle += 1
        if idle % STATE_EVERY == 1:
            current = await run_in_threadpool(ctx.store.experiment, row["id"])
            if current is None or current["state"] in states.TERMINAL:
                # The worker writes every line before its final state is recorded, so
                # draining now delivers the whole log.
                async for piece in _drain(run, offset, since):
                    yield piece
                yield _final(current or row, True)
                return
        await asyncio.sleep(FOLLOW_POLL_S)


@router.get(JOBS + "/logs")
def logs(request: Request, experiment_name: str | None = None, project: str | None = None,
         follow: str | None = None, since: str | None = None,
         user: User = Depends(current_user)) -> StreamingResponse:
    ctx = context(request)
    row = find(ctx, user, experiment_name, project)
    stream = _log_stream(ctx, row, flag(follow, "follow"), integer(since, "since", 0))
    return StreamingResponse(stream, media_type=NDJSON,
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


# ---- stop and resume -------------------------------------------------------------------


class StopRequest(BaseModel):
    experiment_name: str = Field(min_length=1, max_length=200)
    project: str | None = None


class ResumeRequest(BaseModel):
    experiment_name: str = Field(min_length=1, max_length=200)
    max_steps: int = Field(ge=1)
    project: str | None = None


@router.post(JOBS + "/stop")
def stop(body: StopRequest, request: Request, user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row = find(ctx, user, body.experiment_name, body.project)
    exp_id = row["id"]
    if ctx.store.transition(exp_id, states.STOPPED, reason="stopped by user",
                            only_from=(states.PENDING, states.QUEUED)) is None:
        if ctx.store.transition(exp_id, states.STOPPING, reason="stop requested") is not None:
            ctx.scheduler.signal_stop(exp_id)
        else:
            current = ctx.store.experiment(exp_id) or row
            if current["state"] != states.STOPPING:
                raise invalid_state(row["name"], current["state"], "stop")
    return ok(public_row(ctx, ctx.store.experiment(exp_id) or row))


@router.post(JOBS + "/resume")
def resume(body: ResumeRequest, request: Request,
           user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row = find(ctx, user, body.experiment_name, body.project)
    if row["state"] not in states.TERMINAL:
        raise invalid_state(row["name"], row["state"], "resume")
    run = ctx.scheduler.run_dir(row["id"])
    latest = run.latest_checkpoint()
    if latest is None:
        raise ApiError(409, "NO_CHECKPOINT",
                       f"Experiment '{row['name']}' has no checkpoint to resume from")
    manifest = ctx.scheduler.manifest_of(row)  # the server's copy, not the job's file
    training = manifest.setdefault("training", {})
    assert isinstance(training, dict)  # a section of the server's validated copy
    training["max_steps"] = body.max_steps
    policy.check_limits(manifest, ctx.config)
    quota.check(ctx.config, ctx.store, user.id, "Resume refused")
    if ctx.store.count_active(user.id) >= ctx.config.max_active_jobs_per_user:
        raise ApiError(429, "TOO_MANY_JOBS", "Too many jobs waiting or running; try later",
                       limit=ctx.config.max_active_jobs_per_user)
    # the launch rewrites the job's manifest.json from this copy
    if ctx.store.transition(row["id"], states.QUEUED, reason=f"resumed from {latest.name}",
                            only_from=tuple(states.TERMINAL), attempt=row["attempt"] + 1,
                            max_steps=body.max_steps, error=None,
                            manifest=json.dumps(manifest, allow_nan=False)) is None:
        current = ctx.store.experiment(row["id"]) or row
        raise invalid_state(row["name"], current["state"], "resume")
    ctx.scheduler.wake()
    return ok(public_row(ctx, ctx.store.experiment(row["id"]) or row))


# ---- checkpoints and metrics -----------------------------------------------------------


@router.get(JOBS + "/checkpoints")
def checkpoints(request: Request, experiment_name: str | None = None,
                project: str | None = None, user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row = find(ctx, user, experiment_name, project)
    return ok([c.row() for c in ctx.scheduler.run_dir(row["id"]).list_checkpoints()])


@router.get(JOBS + "/checkpoints/download")
def download_checkpoint(request: Request, experiment_name: str | None = None,
                        checkpoint: str | None = None, project: str | None = None,
                        user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row = find(ctx, user, experiment_name, project)
    run = ctx.scheduler.run_dir(row["id"])
    wanted = blank(checkpoint)
    listed = run.list_checkpoints()
    if wanted is None:
        chosen = run.best_checkpoint()
    else:
        # Only names the listing produced are accepted, so no path can leave the folder.
        chosen = next((c for c in listed if c.name == wanted), None)
    if chosen is None:
        what = f"Checkpoint '{wanted}'" if wanted else "A checkpoint"
        names = [c.name for c in listed]
        known = (f"; it has {', '.join(names[-5:])}" + (" (newest 5 shown)"
                 if len(names) > 5 else "")) if names else "; it has none yet"
        raise ApiError(404, "CHECKPOINT_NOT_FOUND",
                       f"{what} not found for experiment '{row['name']}'{known}")
    try:
        data = run.checkpoint_archive(chosen)
    except OSError:  # the job changed it while it was packed
        raise ApiError(409, "CHECKPOINT_CHANGED",
                       f"Checkpoint '{chosen.name}' changed while it was packed; try again"
                       ) from None
    filename = re.sub(r"[^A-Za-z0-9._-]", "_", f"{row['name']}_{chosen.name}") + ".tar.gz"
    return Response(data, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


def _wanted_metrics(names: list[str], asked: Iterable[str]) -> list[str]:
    wanted = [m for m in asked if m]
    unknown = [m for m in wanted if m not in names]
    if unknown:
        raise ApiError(422, "UNKNOWN_METRIC", f"Unknown metric(s): {', '.join(unknown)}",
                       available=names)
    return wanted


@router.get("/api/cli/v1/experiments/metrics")
def metrics(request: Request, experiment_name: str | None = None, project: str | None = None,
            details: str | None = None, preview_rows: str | None = None,
            metric: list[str] = Query(default=[]),
            user: User = Depends(current_user)) -> Response:
    ctx = context(request)
    row = find(ctx, user, experiment_name, project)
    run = ctx.scheduler.run_dir(row["id"])
    names = run.metric_names()
    if blank(preview_rows) is None:
        wide = flag(details, "details")
        return ok({"experiment_id": row["id"], "metrics": names} if wide else names)
    rows = integer(preview_rows, "preview_rows", 0)
    if not names:
        raise ApiError(404, "METRICS_NOT_FOUND",
                       f"No metrics recorded yet for experiment '{row['name']}'")
    try:
        text = run.metrics_csv(_wanted_metrics(names, metric), min(rows, MAX_PREVIEW_ROWS))
    except MetricsUnreadable as exc:
        raise ApiError(422, "METRICS_UNREADABLE",
                       f"The metrics of experiment '{row['name']}' cannot be read: {exc}"
                       ) from None
    filename = re.sub(r"[^A-Za-z0-9._-]", "_", row["name"]) + "_metrics.csv"
    return Response(text, media_type="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})
