"""Projects, resources and the routes this server deliberately lacks."""

from __future__ import annotations

import os
import re

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from agilerl.arena.server.auth import User
from agilerl.arena.server.config import DEFAULT_RESOURCE_ID
from agilerl.arena.server.dependencies import context, current_user, ok
from agilerl.arena.server.errors import ApiError

router = APIRouter()
#: included last so it never shadows a real route.
fallback = APIRouter()
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,127}$"
V1 = "/api/cli/v1"


def blank(value: str | None) -> str | None:
    """Spec §9.1: an empty query value means the parameter is absent."""
    return value if value not in (None, "") else None


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def flag(value: str | None, name: str) -> bool:
    """A boolean query parameter; empty or absent is false."""
    text = (blank(value) or "false").lower()
    if text not in _TRUE | _FALSE:
        raise ApiError(422, "INVALID_REQUEST", f"{name} must be true or false",
                       errors=[f"{name}: expected true or false, got '{value}'"])
    return text in _TRUE


def integer(value: str | None, name: str, default: int, low: int = 0) -> int:
    """An integer query parameter; empty or absent is ``default``."""
    text = blank(value)
    if text is None:
        return default
    try:
        number = int(text)
    except ValueError:
        number = low - 1
    if number < low:
        raise ApiError(422, "INVALID_REQUEST", f"{name} must be an integer >= {low}",
                       errors=[f"{name}: expected an integer >= {low}, got '{value}'"])
    return number


class ProjectCreate(BaseModel):
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = Field(default=None, max_length=2000)
    llm_based: bool = False


class ProjectDelete(BaseModel):
    name: str = Field(min_length=1, max_length=128)


def _project_row(row: dict[str, object]) -> dict[str, object]:
    return {"name": row["name"], "type": "LLM" if row["llm_based"] else "Classic RL",
            "description": row["description"], "created_at": row["created_at"]}


@router.get("/api/cli/v1/capabilities")
def capabilities() -> Response:
    # No on-prem installer here; 404 makes the reference client hide `arena on-prem`.
    raise ApiError(404, "NOT_FOUND", "This server has no on-prem capabilities")


@router.get(V1 + "/projects")
def list_projects(request: Request, user: User = Depends(current_user)) -> Response:
    return ok([_project_row(r) for r in context(request).store.projects(user.id)])


@router.post(V1 + "/projects/create")
def create_project(body: ProjectCreate, request: Request,
                   user: User = Depends(current_user)) -> Response:
    row = context(request).store.create_project(user.id, body.name.strip(), body.description,
                                                body.llm_based)
    return ok(_project_row(row), status=201)


@router.delete(V1 + "/projects/delete")
def delete_project(body: ProjectDelete, request: Request,
                   user: User = Depends(current_user)) -> Response:
    context(request).store.delete_project(user.id, body.name.strip())
    return ok({"deleted": body.name.strip()})


def _ram_gb() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return 0.0


@router.get(V1 + "/resources/list")
def resources(request: Request) -> Response:
    cluster = context(request).scheduler.cluster
    if cluster is not None:  # the Ray cluster's alive nodes, one tier per node shape
        from agilerl.arena.server.cluster import ClusterUnavailable

        try:
            return ok({"tiers": cluster.tiers()})
        except ClusterUnavailable as exc:
            raise ApiError(503, "CLUSTER_UNAVAILABLE", str(exc)) from None
    slots = context(request).config.slots
    tier = {"name": f"This machine ({slots} slot{'s' if slots != 1 else ''})", "num_gpus": 0,
            "gpu_type": None, "num_cpus": os.cpu_count() or 1, "ram_gb": _ram_gb(),
            "price_per_node_hour": 0, "slots": slots}
    return ok({"tiers": {DEFAULT_RESOURCE_ID: tier}})


_UNSUPPORTED = re.compile(r"^/api/cli/v1/(inference/.*|on-prem/.*)$")


@fallback.api_route("/api/cli/v1/{rest:path}", methods=["GET", "POST", "DELETE", "PATCH", "PUT"])
def unsupported(request: Request) -> Response:
    """Reference routes this server does not offer, answered plainly instead of a bare 404."""
    path = request.url.path
    if _UNSUPPORTED.match(path):
        raise ApiError(
            501, "NOT_SUPPORTED",
            f"{path} is not offered by this self-hosted server: deployments (inference) and"
            " on-prem installers are hosted-Arena features.",
        )
    raise ApiError(404, "NOT_FOUND", f"No route {request.method} {path}")
