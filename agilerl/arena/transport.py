"""Sending one request to Arena: credentials, retries, 401 refresh, errors.

Every request carries ``Authorization: Bearer <credential>``. A 401 is answered once:
by refreshing the OAuth tokens, or by falling back from a rejected API key to stored
OAuth tokens. Transport failures and 5xx answers are retried with backoff, but only
for requests that are safe to repeat (see :mod:`agilerl.arena.retry`). Any other
non-2xx answer becomes the exception chosen by the request path.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlsplit

import httpx

from agilerl.arena.auth import Authenticator
from agilerl.arena.errors import ArenaAPIError, ArenaAuthError, error_class_for_path
from agilerl.arena.retry import IDEMPOTENT_METHODS, RetryPolicy
from agilerl.arena.stream import Event, NDJsonStream
from agilerl.arena.upload import FilePart

if TYPE_CHECKING:
    from typing import Unpack

    from agilerl.core.value_types import JsonScalar, JsonValue

__all__ = ["API_PREFIX", "IDEMPOTENCY_HEADER", "RequestOptions", "Transport"]

logger = logging.getLogger("agilerl.arena.client")

IDEMPOTENCY_HEADER = "Idempotency-Key"
API_PREFIX = "/api/cli/v1"
"""Every CLI endpoint lives under this path."""
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}

if TYPE_CHECKING:
    from typing import TypeAlias

    #: A request's query: names to values, or (name, value) pairs (a name may repeat).
    QueryParams: TypeAlias = Mapping[str, JsonScalar] | list[tuple[str, JsonScalar]]


class RequestOptions(TypedDict, total=False):
    """What a request carries besides its method and path (see :meth:`Transport.send`)."""

    params: QueryParams | None
    json: Mapping[str, object] | None
    data: Mapping[str, str] | None
    files: Mapping[str, FilePart] | None
    timeout: float | None
    headers: Mapping[str, str] | None


class _Content(TypedDict):
    params: QueryParams | None
    json: Mapping[str, object] | None
    data: Mapping[str, str] | None
    files: Mapping[str, FilePart] | None


class Transport:
    """The HTTP session shared by every :class:`~agilerl.arena.client.ArenaClient` call."""

    def __init__(
        self,
        base_url: str,
        auth: Authenticator,
        *,
        request_timeout: float,
        upload_timeout: float,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url
        self.auth = auth
        self.request_timeout = request_timeout
        self.upload_timeout = upload_timeout
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=base_url,
            timeout=request_timeout,
            follow_redirects=True,
            transport=transport,
        )
        parts = urlsplit(base_url)
        if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
            logger.warning(
                "Arena base URL %s is plain http: credentials travel unencrypted.", base_url
            )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # -- core ----------------------------------------------------------------------
    def send(
        self,
        method: str,
        path: str,
        *,
        params: QueryParams | None = None,
        json: Mapping[str, object] | None = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, FilePart] | None = None,
        timeout: float | None = None,
        stream: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send a request and return its (2xx) response; raise a mapped error otherwise."""
        extra = dict(headers or {})
        repeatable = method.upper() in IDEMPOTENT_METHODS or IDEMPOTENCY_HEADER in extra
        content: _Content = {"params": params, "json": json, "data": data, "files": files}
        http_timeout = _timeout(timeout or self.request_timeout, stream)
        attempt, auth_retried = 0, False
        self.auth.ensure_fresh()  # long sessions: refresh shortly before the token lapses
        while True:
            extra["Authorization"] = f"Bearer {self.auth.bearer()}"
            _rewind(files)
            request = self._http.build_request(
                method, path, headers=extra, timeout=http_timeout, **content
            )
            try:
                response = self._http.send(request, stream=stream)
            except httpx.HTTPError as exc:
                if not (repeatable and self._retry(attempt, None, exc)):
                    raise self._network_error(exc) from None
                attempt += 1
                continue
            if response.status_code == 401:
                if auth_retried or not self._recover_401(response, extra["Authorization"]):
                    raise self._auth_error(response)
                auth_retried = True
                continue
            if repeatable and self._retry(attempt, response, None):
                attempt += 1
                continue
            if not response.is_success:
                body = response.read()
                response.close()
                raise error_class_for_path(path).from_response_body(body, response.status_code)
            return response

    def _retry(
        self, attempt: int, response: httpx.Response | None, error: Exception | None
    ) -> bool:
        """Wait and return True when this failure deserves another try."""
        if attempt >= self.retry.retries:
            return False
        if error is not None:
            if not self.retry.should_retry_error(error):
                return False
            why = type(error).__name__
        elif response is not None and self.retry.should_retry_status(response.status_code):
            why = f"HTTP {response.status_code}"
            _discard(response)
        else:
            return False
        self._wait(attempt, response, why)
        return True

    def _network_error(self, exc: Exception) -> ArenaAPIError:
        return ArenaAPIError(
            f"Network error communicating with Arena at {self.base_url}: "
            f"{type(exc).__name__}: {exc}",
            0,
            sdk_hint="Check the server address (ARENA_BASE_URL) and your network.",
            cli_hint="Check --base-url / ARENA_BASE_URL and your network.",
        )

    def _wait(self, attempt: int, response: httpx.Response | None, why: str) -> None:
        delay = self.retry.delay(attempt, response)
        logger.info("Arena request failed (%s); retrying in %.1fs.", why, delay)
        self._sleep(delay)

    def _recover_401(self, response: httpx.Response, sent: str) -> bool:
        """Make the next try use a fresh credential; False when there is none to try."""
        if self.auth.can_refresh:
            _discard(response)
            # Raises ArenaAuthError when the refresh is refused.
            self.auth.refresh(stale=sent.removeprefix("Bearer "))
            return True
        if self.auth.using_api_key and self.auth.has_oauth_token:
            _discard(response)
            logger.info("The API key was rejected; using the stored login instead.")
            self.auth.drop_api_key()
            return True
        return False

    def _auth_error(self, response: httpx.Response) -> ArenaAuthError:
        body = response.read().decode("utf-8", errors="replace")[:200]
        response.close()
        if self.auth.using_api_key:
            return ArenaAuthError(
                "Invalid API key.",
                sdk_hint="Check api_key= / ARENA_API_KEY, or create a new key.",
                cli_hint="Check --api-key / ARENA_API_KEY, or run 'arena login' again.",
            )
        return ArenaAuthError(
            f"Session expired and could not be refreshed. Server response: {body}",
            sdk_hint="Call ArenaClient().login() to sign in again.",
            cli_hint="Run 'arena login' to sign in again.",
        )

    # -- shapes --------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Unpack[RequestOptions]) -> JsonValue:
        """Send and decode: JSON (``{"ok": true, "data": x}`` unwrapped to ``x``) or text."""
        response = self.send(method, path, **kwargs)
        if response.headers.get("content-type", "").startswith("application/json"):
            try:
                value = response.json()
            except ValueError:
                return response.text
            if isinstance(value, dict) and value.get("ok") is True and "data" in value:
                return value["data"]
            return value
        return response.text

    def request_raw(
        self, method: str, path: str, **kwargs: Unpack[RequestOptions]
    ) -> tuple[bytes, str, str | None]:
        """Send and return ``(body, content type, content disposition)``."""
        response = self.send(method, path, **kwargs)
        return (
            response.content,
            response.headers.get("content-type", ""),
            response.headers.get("content-disposition"),
        )

    def open_stream(
        self,
        method: str,
        path: str,
        handler: Callable[[Event], None] | None = None,
        **kwargs: Unpack[RequestOptions],
    ) -> NDJsonStream:
        """Send with a streamed body and return the NDJSON event reader."""
        response = self.send(method, path, stream=True, **kwargs)
        return NDJsonStream(response, path, handler)


def _timeout(seconds: float, stream: bool) -> httpx.Timeout:
    # A stream may stay quiet for a long time between lines (a job's log), so only the
    # read phase is unbounded; connecting, writing and waiting for the pool are not.
    if stream:
        return httpx.Timeout(connect=seconds, write=seconds, pool=seconds, read=None)
    return httpx.Timeout(seconds)


def _rewind(files: Mapping[str, FilePart] | None) -> None:
    for part in (files or {}).values():
        handle = part[1] if isinstance(part, tuple) and len(part) > 1 else None
        if handle is not None and hasattr(handle, "seek"):
            handle.seek(0)


def _discard(response: httpx.Response) -> None:
    with contextlib.suppress(httpx.HTTPError):
        response.read()
    response.close()
