"""Credentials for Arena: API keys, stored OAuth tokens and the device login.

Precedence: an ``api_key=`` argument, then ``ARENA_API_KEY``, then what
``~/.arena/credentials.json`` holds (an API key saved by ``arena login --api-key`` or
the OAuth tokens saved by ``arena login``). The login is the OAuth 2.0 device
authorization grant (RFC 8628) against Keycloak-style endpoints
``{auth}/realms/{realm}/protocol/openid-connect/...``.

Stored credentials remember which server issued them and are only ever sent back to
that server. No secret is ever logged, shown in an error or in a ``repr``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import sys
import threading
import time
import webbrowser
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import httpx

from agilerl.arena.config import (
    ArenaSettings,
    credentials_path,
    read_json_object,
    write_private_json,
)
from agilerl.arena.errors import ArenaAuthError, ArenaTimeoutError, redact

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = ["Authenticator", "jwt_expiry", "token_is_fresh"]

logger = logging.getLogger("agilerl.arena.auth")

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
EXPIRY_SKEW_S = 60.0
SLOW_DOWN_STEP_S = 5.0
MIN_INTERVAL_S = 0.1
_RELOGIN_HINT = "Run 'arena login' (or ArenaClient().login()) to sign in again."


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (signature not checked); ``None`` for opaque tokens."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, UnicodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) else None


def token_is_fresh(token: str, now: float | None = None) -> bool:
    """True when *token* is a JWT that stays valid for more than a minute."""
    exp = jwt_expiry(token)
    current = time.time() if now is None else now
    return exp is not None and exp > current + EXPIRY_SKEW_S


def _print_prompt(url: str, user_code: str | None) -> None:
    code = f" and confirm the code {user_code}" if user_code else ""
    print(f"To sign in to Arena, open {url}{code}", file=sys.stderr, flush=True)


class Authenticator:
    """Holds the credential in use and obtains, refreshes and forgets tokens.

    :param settings: Where the API and the auth server live.
    :param api_key: An explicit API key (wins over everything else).
    :param transport: An httpx transport for the auth server (tests).
    :param store_path: The credentials file (default ``~/.arena/credentials.json``).
    """

    def __init__(
        self,
        settings: ArenaSettings,
        api_key: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        store_path: Path | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._settings = settings
        self._store_path = store_path or credentials_path()
        self._transport = transport
        self._timeout = timeout
        self._tokens: JsonObject = {}
        self._api_key: str | None = None
        self._refresh_lock = threading.Lock()  # threads sharing a client refresh once
        self.source = "none"
        if api_key:
            self._api_key, self.source = api_key, "argument"
        elif os.environ.get("ARENA_API_KEY"):
            self._api_key, self.source = os.environ["ARENA_API_KEY"], "environment"
        self._load_stored()

    # -- state ---------------------------------------------------------------------
    def __repr__(self) -> str:
        state = "authenticated" if self.is_authenticated else "unauthenticated"
        return f"Authenticator({self._issuer()!r}, {state}, source={self.source})"

    @property
    def is_authenticated(self) -> bool:
        """True when an API key or an access token is held."""
        return bool(self._api_key or self._tokens.get("access_token"))

    @property
    def using_api_key(self) -> bool:
        """True when requests are authorised by an API key rather than OAuth tokens."""
        return bool(self._api_key)

    @property
    def can_refresh(self) -> bool:
        """True when a refresh token is held and no API key is in use."""
        return not self._api_key and bool(self._tokens.get("refresh_token"))

    @property
    def has_oauth_token(self) -> bool:
        """True when an OAuth access token is held (used for the API-key fallback)."""
        return bool(self._tokens.get("access_token"))

    def bearer(self) -> str:
        """The value for ``Authorization: Bearer``; raises when there is none."""
        credential = self._api_key or self._tokens.get("access_token")
        if not credential:
            raise ArenaAuthError(
                "Not signed in to Arena.",
                sdk_hint="Pass api_key=, set ARENA_API_KEY, or call ArenaClient().login().",
                cli_hint="Run 'arena login', pass --api-key, or set ARENA_API_KEY.",
            )
        return str(credential)

    def drop_api_key(self) -> None:
        """Stop using the API key for the rest of this session (OAuth fallback)."""
        self._api_key = None
        self.source = "stored"

    def _issuer(self) -> str:
        return f"{self._settings.keycloak_url}/realms/{self._settings.realm}"

    def _oidc(self, endpoint: str) -> str:
        return f"{self._issuer()}/protocol/openid-connect/{endpoint}"

    # -- storage -------------------------------------------------------------------
    def _load_stored(self) -> None:
        stored = read_json_object(self._store_path)
        if not stored:
            return
        if (
            stored.get("auth_server", self._issuer()) != self._issuer()
            or stored.get("base_url", self._settings.base_url) != self._settings.base_url
        ):
            logger.debug("Stored Arena credentials belong to another server; not using them.")
            return
        if stored.get("access_token"):
            self._tokens = dict(stored)
        if not self._api_key and isinstance(stored.get("api_key"), str):
            assert isinstance(stored["api_key"], str)  # checked just above
            self._api_key, self.source = stored["api_key"], "stored"
        elif not self._api_key and self._tokens:
            self.source = "stored"

    def _save(self, payload: Mapping[str, JsonValue]) -> None:
        record = dict(payload)
        record["auth_server"] = self._issuer()
        record["base_url"] = self._settings.base_url
        write_private_json(self._store_path, record)

    def store_api_key(self, api_key: str) -> None:
        """Save *api_key* as this user's credential for the current server and use it."""
        self._api_key, self.source = api_key, "stored"
        self._tokens = {}
        self._save({"api_key": api_key})

    # -- token endpoint ------------------------------------------------------------
    def _post_form(self, endpoint: str, form: dict[str, str]) -> httpx.Response:
        with httpx.Client(transport=self._transport, timeout=self._timeout) as http:
            return http.post(self._oidc(endpoint), data=form)

    def _accept_tokens(self, answer: JsonObject) -> None:
        merged = {**self._tokens, **answer}
        merged.pop("api_key", None)
        self._tokens = merged
        self._save(merged)

    def refresh(self, stale: str | None = None) -> None:
        """Exchange the refresh token for new tokens and store them.

        :param stale: The access token a request was refused with; when another thread
            has replaced it meanwhile, nothing is done.
        :raises ArenaAuthError: when no refresh token is held or the server refuses it.
        """
        with self._refresh_lock:
            if stale is not None and self._tokens.get("access_token") != stale:
                return
            self._refresh_locked()

    def _refresh_locked(self) -> None:
        token = self._tokens.get("refresh_token")
        if not token:
            raise ArenaAuthError("No refresh token is stored.", cli_hint=_RELOGIN_HINT)
        form = {
            "grant_type": "refresh_token",
            "refresh_token": str(token),
            "client_id": self._settings.client_id,
        }
        try:
            response = self._post_form("token", form)
        except httpx.HTTPError as exc:
            raise ArenaAuthError(
                f"Token refresh failed: cannot reach {self._settings.keycloak_url} "
                f"({type(exc).__name__}).",
                sdk_hint=_RELOGIN_HINT,
            ) from None
        if response.status_code != 200:
            raise ArenaAuthError(
                "Token refresh failed — your session may have expired.", sdk_hint=_RELOGIN_HINT
            )
        self._accept_tokens(_json_object(response))

    def ensure_fresh(self) -> None:
        """Refresh ahead of expiry when the access token is about to lapse (errors ignored)."""
        access = self._tokens.get("access_token")
        if not self.can_refresh or not access or jwt_expiry(str(access)) is None:
            return
        if not token_is_fresh(str(access)):
            with contextlib.suppress(ArenaAuthError):
                self.refresh(stale=str(access))

    # -- login / logout --------------------------------------------------------------
    def login(
        self,
        timeout: float = 300.0,
        *,
        force: bool = False,
        open_browser: bool = True,
        prompt: Callable[[str, str | None], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Sign in: reuse a valid token, else refresh, else run the device flow."""
        if self._api_key and not force:
            logger.info("An API key is in use; no login needed.")
            return
        if force:
            self._api_key = None
        else:
            access = self._tokens.get("access_token")
            if access and token_is_fresh(str(access)):
                return
            if self._tokens.get("refresh_token"):
                with contextlib.suppress(ArenaAuthError):
                    self.refresh()
                    return
        device = _DeviceFlow(self, sleep=sleep, clock=clock)
        self._accept_tokens(device.run(timeout, open_browser, prompt or _print_prompt))
        self.source = "stored"

    def logout(self) -> None:
        """Revoke the refresh token (best effort) and delete the stored credentials."""
        token = self._tokens.get("refresh_token")
        if token:
            form = {"client_id": self._settings.client_id, "refresh_token": str(token)}
            with contextlib.suppress(httpx.HTTPError):
                self._post_form("logout", form)
        self._tokens = {}
        if self.source == "stored":
            self._api_key = None
        with contextlib.suppress(OSError):
            self._store_path.unlink()


class _DeviceFlow:
    """One run of the device authorization grant."""

    def __init__(
        self,
        auth: Authenticator,
        *,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
    ) -> None:
        self._auth = auth
        self._sleep = sleep
        self._clock = clock

    def run(
        self,
        timeout: float,
        open_browser: bool,
        prompt: Callable[[str, str | None], None],
    ) -> JsonObject:
        grant = self._start()
        url = str(grant.get("verification_uri_complete") or grant.get("verification_uri") or "")
        prompt(url, cast("str | None", grant.get("user_code")))  # RFC 8628: a string
        if open_browser and url and not _open(url):
            logger.warning("Could not open a browser; open the address above yourself.")
        given = grant.get("interval")
        # RFC 8628: 5 s when the server names none; never a busy loop.
        interval = max(MIN_INTERVAL_S, float(cast(float, given))) if given is not None else 5.0
        limit = min(timeout, float(cast(float, grant.get("expires_in") or timeout)))
        return self._poll(str(grant["device_code"]), interval, limit, timeout)

    def _start(self) -> JsonObject:
        settings = self._auth._settings
        form = {"client_id": settings.client_id, "scope": "openid profile email"}
        try:
            response = self._auth._post_form("auth/device", form)
        except httpx.HTTPError as exc:
            raise ArenaAuthError(
                "Failed to initiate device authorization: cannot reach "
                f"{settings.keycloak_url} ({type(exc).__name__}).",
                cli_hint="Check --keycloak-url / ARENA_KEYCLOAK_URL and your network.",
            ) from None
        grant = _json_object(response)
        if response.status_code != 200 or "device_code" not in grant:
            reason = grant.get("error_description") or grant.get("error") or response.text[:200]
            raise ArenaAuthError(f"Failed to initiate device authorization: {redact(str(reason))}")
        return grant

    def _poll(self, device_code: str, interval: float, limit: float, timeout: float) -> JsonObject:
        settings = self._auth._settings
        form = {
            "grant_type": DEVICE_GRANT,
            "device_code": device_code,
            "client_id": settings.client_id,
        }
        deadline = self._clock() + limit
        while self._clock() < deadline:
            self._sleep(max(0.0, min(interval, deadline - self._clock())))
            try:
                response = self._auth._post_form("token", form)
            except httpx.HTTPError:
                interval = min(interval * 2, 60.0)  # the auth server is unreachable: back off
                continue
            answer = _json_object(response)
            if response.status_code == 200 and answer.get("access_token"):
                return answer
            error = str(answer.get("error") or _error_name(response.text))
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                interval += SLOW_DOWN_STEP_S
                continue
            if error == "expired_token":
                raise ArenaTimeoutError(
                    "Device code expired before the login was approved.",
                    cli_hint="Run 'arena login' again.",
                )
            raise ArenaAuthError(f"Device authorization failed: {redact(error)}")
        raise ArenaTimeoutError(
            f"Authentication timed out after {int(timeout)}s.",
            cli_hint="Run 'arena login' again and approve the login in your browser.",
        )


def _open(url: str) -> bool:
    try:
        return bool(webbrowser.open(url))
    except webbrowser.Error:
        return False


def _json_object(response: httpx.Response) -> JsonObject:
    try:
        value = response.json()
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _error_name(text: str) -> str:
    for name in ("authorization_pending", "slow_down", "expired_token"):
        if name in text:
            return name
    return text[:100] or "unknown error"
