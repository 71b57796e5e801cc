"""Keycloak-compatible device flow, token endpoints, approval page and user routes."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field

from agilerl.arena.server.auth import User
from agilerl.arena.server.dependencies import context, current_user, ok
from agilerl.arena.server.errors import ApiError

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
_OIDC = "/realms/{realm}/protocol/openid-connect"
#: longest value any field of the unauthenticated OAuth forms may have (tokens included).
MAX_FORM_FIELD = 4096
#: longest ``client_id`` and ``scope`` a device login may ask for (they are stored).
MAX_CLIENT_ID = 128
MAX_SCOPE = 512

public = APIRouter()
api = APIRouter()


def _oauth_error(err: ApiError) -> JSONResponse:
    """Keycloak's error shape: ``{"error": <name>, "error_description": <text>}``."""
    retry = err.extras.get("retry_after")
    headers = {"Retry-After": str(retry)} if retry is not None else None
    return JSONResponse({"error": err.code, "error_description": err.message},
                        status_code=err.status, headers=headers)


async def _form(request: Request) -> dict[str, str]:
    """The non-empty text fields of a form; 400 ``invalid_request`` for an oversized one."""
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str) and v != ""}
    for key, value in fields.items():
        if len(key) > MAX_FORM_FIELD or len(value) > MAX_FORM_FIELD:
            raise ApiError(400, "invalid_request",
                           f"Form field '{key[:64]}' is longer than {MAX_FORM_FIELD} characters")
    return fields


def _bounded(form: dict[str, str], key: str, limit: int) -> None:
    value = form.get(key, "")
    if len(value) > limit or not value.isprintable():
        raise ApiError(400, "invalid_request",
                       f"{key} must be printable text of at most {limit} characters")


def _client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _rate_limit(request: Request) -> None:
    wait = context(request).device_limiter.allow(_client_address(request))
    if wait > 0:
        seconds = max(1, int(wait + 0.999))
        raise ApiError(429, "slow_down",
                       f"Too many device logins from this address; retry in {seconds} s",
                       retry_after=seconds)


def _check_realm(request: Request, realm: str) -> None:
    if realm != context(request).config.realm:
        raise ApiError(404, "realm_not_found", f"Realm '{realm}' does not exist")


@public.post(_OIDC + "/auth/device")
async def device_authorization(request: Request, realm: str) -> Response:
    try:
        _check_realm(request, realm)
        _rate_limit(request)
        form = await _form(request)
        if not form.get("client_id"):
            raise ApiError(400, "invalid_client", "client_id is required")
        _bounded(form, "client_id", MAX_CLIENT_ID)
        _bounded(form, "scope", MAX_SCOPE)
        ctx = context(request)
        base = ctx.config.public_url or str(request.base_url)
        data = ctx.auth.start_device(form["client_id"], form.get("scope", "openid"), base)
    except ApiError as err:
        return _oauth_error(err)
    return JSONResponse(data)


@public.post(_OIDC + "/token")
async def token(request: Request, realm: str) -> Response:
    try:
        _check_realm(request, realm)
        form = await _form(request)
        grant = form.get("grant_type", "")
        auth = context(request).auth
        if grant == DEVICE_GRANT and form.get("device_code"):
            data = auth.poll_device(form["device_code"])
        elif grant == "refresh_token" and form.get("refresh_token"):
            data = auth.refresh(form["refresh_token"])
        else:
            raise ApiError(400, "unsupported_grant_type",
                           f"Unsupported grant type '{grant}' or missing parameters")
    except ApiError as err:
        return _oauth_error(err)
    return JSONResponse(data)


@public.post(_OIDC + "/logout")
async def logout(request: Request, realm: str) -> Response:
    try:
        _check_realm(request, realm)
        form = await _form(request)
    except ApiError as err:
        return _oauth_error(err)
    if form.get("refresh_token"):
        context(request).auth.logout(form["refresh_token"])
    return Response(status_code=204)


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Arena device login</title>
<link rel="stylesheet" href="/static/style.css"></head><body><main class="narrow">
<h1>Approve a device login</h1><p>{message}</p>
<form method="post" action="device">
<p><label>Code <input name="user_code" value="{code}" required></label></p>
<p><label>Your API key <input name="api_key" type="password" required></label></p>
<p><button type="submit">Approve</button></p></form>
<p>Headless machines: <code>arena-server device approve --data-dir DIR --user NAME CODE</code>
</p></main></body></html>"""


@public.get("/device")
async def device_page(user_code: str = "") -> HTMLResponse:
    message = "Enter the code shown by the CLI and an API key to sign that device in."
    return HTMLResponse(_PAGE.format(message=message, code=html.escape(user_code)))


@public.post("/device")
async def device_approve_form(request: Request) -> HTMLResponse:
    try:
        form = await _form(request)
    except ApiError as err:
        return HTMLResponse(_PAGE.format(message=html.escape(err.message), code=""),
                            status_code=err.status)
    code = form.get("user_code", "")[:32]
    try:
        user = context(request).auth.authenticate(f"Bearer {form.get('api_key', '')}")
        context(request).auth.approve_device(code, user)
    except ApiError as err:
        page = _PAGE.format(message=html.escape(err.message), code=html.escape(code))
        return HTMLResponse(page, status_code=err.status)
    return HTMLResponse("<!doctype html><p>Device approved; you can close this page.</p>")


class ApproveRequest(BaseModel):
    user_code: str = Field(min_length=1, max_length=32)


class TokenRequest(BaseModel):
    user: str | None = Field(default=None, min_length=1, max_length=64,
                             pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")


@api.post("/api/admin/device/approve")
def approve_device(body: ApproveRequest, request: Request,
                   user: User = Depends(current_user)) -> Response:
    """Sign a pending device login in as the calling user (headless approval)."""
    context(request).auth.approve_device(body.user_code, user)
    return ok({"approved": True, "user": user.name})


@api.post("/api/admin/tokens")
def create_token(body: TokenRequest, request: Request,
                 user: User = Depends(current_user)) -> Response:
    """A new PAT for yourself, or for anyone when you are an admin."""
    target = body.user or user.name
    if target != user.name and not user.is_admin:
        raise ApiError(403, "FORBIDDEN", "Only an admin can create tokens for other users")
    return ok({"token": context(request).auth.create_pat(target)}, status=201)


def _profile(user: User) -> JsonObject:
    return {"id": user.id, "email": f"{user.name}@localhost", "first_name": user.name,
            "last_name": "", "username": user.name, "is_admin": user.is_admin}


@api.get("/api/users/current")
def users_current(user: User = Depends(current_user)) -> Response:
    return ok(_profile(user))


@api.get("/api/users/credits")
def users_credits() -> Response:
    # A self-hosted server does not bill; report that plainly rather than a made-up balance.
    return ok({"credits": None, "billing": "none (self-hosted server)"})
