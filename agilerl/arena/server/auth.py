"""Credentials: personal access tokens, signed JWTs and the OAuth device flow.

* PATs look like ``arena_pat_<uuid>_<secret>``; only ``sha256(token)`` is stored, looked up
  by the uuid and compared in constant time.
* Access and refresh tokens are HS256 JWTs signed with a secret generated into the data
  folder (mode 0600). Refresh tokens are single use (rotated) and revocable (logout).
* Device codes are stored hashed too; a device is approved by an authenticated user.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

import jwt

from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.store import Store

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject

PAT_PREFIX = "arena_pat_"
_PAT_RE = re.compile(r"^arena_pat_([0-9a-f-]{36})_([0-9a-f]{64})$")
_ISSUER = "agilerl-arena-server"
#: The ``sub`` this server signs: a user id in decimal ASCII that fits SQLite's integers.
_SUBJECT_RE = re.compile(r"[1-9][0-9]{0,17}")


class _Claims(TypedDict):
    """A verified token's claims (as this server signs them), plus the user id its subject
    names."""

    iss: str
    sub: str
    typ: str
    iat: int
    exp: int
    jti: str
    user_id: int


_USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels: codes never spell words


@dataclass(frozen=True)
class User:
    id: int
    name: str
    is_admin: bool


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def load_or_create_secret(path: Path) -> bytes:
    """Read the signing secret, creating it owner-only from the first byte if absent."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(64))
    return path.read_bytes()


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "UNAUTHORIZED", message)


class Authenticator:
    """Issues and checks every credential the server accepts."""

    def __init__(self, store: Store, config: ServerConfig) -> None:
        self.store = store
        self.config = config
        self._secret = load_or_create_secret(config.secret_path)

    # ---- personal access tokens -------------------------------------------------------

    def create_pat(self, user_name: str, *, admin: bool = False) -> str:
        user = self.store.ensure_user(user_name, admin=admin)
        token_id = str(uuid.uuid4())
        token = f"{PAT_PREFIX}{token_id}_{secrets.token_hex(32)}"
        self.store.add_token(token_id, user["id"], sha256_hex(token))
        return token

    def _check_pat(self, token: str) -> User:
        match = _PAT_RE.match(token)
        row = self.store.token(match.group(1)) if match else None
        # Compare even when the id is unknown so timing does not reveal which ids exist.
        expected = row["token_hash"] if row else "0" * 64
        if not hmac.compare_digest(sha256_hex(token), expected) or row is None:
            raise unauthorized("Invalid API key")
        return self._user(row["user_id"])

    def _user(self, user_id: int) -> User:
        row = self.store.user(user_id)
        if row is None:
            raise unauthorized("Unknown user")
        return User(id=row["id"], name=row["name"], is_admin=bool(row["is_admin"]))

    # ---- JWTs -------------------------------------------------------------------------

    def _sign(self, user_id: int, typ: str, ttl: int) -> tuple[str, str, float]:
        now = time.time()
        jti = uuid.uuid4().hex
        claims = {"iss": _ISSUER, "sub": str(user_id), "typ": typ, "iat": int(now),
                  "exp": int(now + ttl), "jti": jti}
        return jwt.encode(claims, self._secret, algorithm="HS256"), jti, now + ttl

    def _decode(self, token: str, typ: str) -> _Claims:
        claims = jwt.decode(token, self._secret, algorithms=["HS256"], issuer=_ISSUER,
                            options={"require": ["exp", "sub", "typ", "jti"]})
        if claims.get("typ") != typ:
            raise jwt.InvalidTokenError("wrong token type")
        # Only this server's secret signs tokens, but a token is still input: a subject it
        # never writes is refused like a bad signature, never turned into a 500.
        if not isinstance(claims["sub"], str) or not _SUBJECT_RE.fullmatch(claims["sub"]):
            raise jwt.InvalidTokenError("subject is not a user id")
        claims["user_id"] = int(claims["sub"])
        return cast(_Claims, claims)

    def issue_tokens(self, user_id: int) -> JsonObject:
        """A fresh access/refresh pair in the shape Keycloak's token endpoint returns."""
        access, _, _ = self._sign(user_id, "access", self.config.access_token_ttl_s)
        refresh, jti, exp = self._sign(user_id, "refresh", self.config.refresh_token_ttl_s)
        self.store.add_refresh(jti, user_id, exp)
        return {
            "access_token": access,
            "expires_in": self.config.access_token_ttl_s,
            "refresh_token": refresh,
            "refresh_expires_in": self.config.refresh_token_ttl_s,
            "token_type": "Bearer",
            "scope": "openid profile email",
        }

    def refresh(self, refresh_token: str) -> JsonObject:
        """Rotate a refresh token; any problem is Keycloak's ``invalid_grant``."""
        try:
            claims = self._decode(refresh_token, "refresh")
        except jwt.InvalidTokenError:
            raise ApiError(400, "invalid_grant", "Invalid refresh token") from None
        if not self.store.revoke_refresh(claims["jti"]):
            raise ApiError(400, "invalid_grant", "Refresh token already used or revoked")
        return self.issue_tokens(claims["user_id"])

    def logout(self, refresh_token: str) -> None:
        try:
            claims = self._decode(refresh_token, "refresh")
        except jwt.InvalidTokenError:
            return
        self.store.revoke_refresh(claims["jti"])

    # ---- bearer check -----------------------------------------------------------------

    def authenticate(self, header: str | None) -> User:
        """The user behind an ``Authorization: Bearer ...`` header, or a 401."""
        if not header:
            raise unauthorized("Missing bearer token: log in or pass an API key")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized("Authorization header must be 'Bearer <token>'")
        if token.startswith(PAT_PREFIX):
            return self._check_pat(token)
        try:
            claims = self._decode(token, "access")
        except jwt.ExpiredSignatureError:
            raise unauthorized("Access token expired") from None
        except jwt.InvalidTokenError:
            raise unauthorized("Invalid access token") from None
        return self._user(claims["user_id"])

    # ---- device authorization grant ---------------------------------------------------

    def start_device(self, client_id: str, scope: str, base_url: str) -> JsonObject:
        device_code = secrets.token_urlsafe(32)
        user_code = "".join(secrets.choice(_USER_CODE_ALPHABET) for _ in range(8))
        user_code = f"{user_code[:4]}-{user_code[4:]}"
        ttl = self.config.device_code_ttl_s
        interval = self.config.device_poll_interval_s
        now = time.time()
        if not self.store.create_device(sha256_hex(device_code), user_code, client_id, scope,
                                        now + ttl, interval, purge_before=now - ttl,
                                        max_pending=self.config.max_pending_device_codes):
            raise ApiError(429, "slow_down", "Too many device logins are pending on this"
                           " server; retry in a minute", retry_after=60)
        verify = f"{base_url.rstrip('/')}/device"
        return {
            "device_code": device_code,
            "user_code": user_code,
            "verification_uri": verify,
            "verification_uri_complete": f"{verify}?user_code={user_code}",
            "expires_in": ttl,
            "interval": interval,
        }

    def poll_device(self, device_code: str) -> JsonObject:
        """Token endpoint for the device grant (errors use Keycloak's names, status 400)."""
        key = sha256_hex(device_code)
        row = self.store.device(key)
        now = time.time()
        if row is None:
            raise ApiError(400, "invalid_grant", "Unknown device code")
        if row["expires_at"] <= now:
            raise ApiError(400, "expired_token", "Device code expired")
        if row["status"] == "approved" and self.store.consume_device(key):
            return self.issue_tokens(int(row["user_id"]))
        if row["status"] != "pending":
            raise ApiError(400, "invalid_grant", "Device code already used")
        too_soon = now - row["last_poll"] < row["interval_s"] * 0.5
        self.store.touch_device(key, now)
        if too_soon:
            raise ApiError(400, "slow_down", "Polling too fast")
        raise ApiError(400, "authorization_pending", "Waiting for the user to approve")

    def approve_device(self, user_code: str, user: User) -> None:
        code = user_code.strip().upper()
        if not self.store.approve_device(code, user.id, time.time()):
            raise ApiError(404, "DEVICE_CODE_NOT_FOUND",
                           f"No pending device login with code '{code}' (expired or used?)")
