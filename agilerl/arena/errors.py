"""Exceptions raised by the Arena client, and turning an error response into one.

Every failure a user can meet while talking to an Arena server ends up as an
:class:`ArenaError` whose text says what went wrong and what to do next. Messages
never carry a credential: :func:`redact` scrubs anything that looks like a token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue


__all__ = [
    "ArenaAPIError",
    "ArenaAuthError",
    "ArenaConfigError",
    "ArenaEnvironmentNotFoundError",
    "ArenaError",
    "ArenaFileNotFoundError",
    "ArenaImportError",
    "ArenaInferenceError",
    "ArenaTimeoutError",
    "ArenaTrainingError",
    "ArenaValidationError",
    "error_class_for_path",
    "parse_error_body",
    "redact",
    "sanitise_message",
]

# Credentials that may appear in text echoed back by a server or a library:
# personal access tokens, JWTs and "Bearer <anything>".
_SECRET_PATTERNS = (
    re.compile(r"arena_pat_[A-Za-z0-9_\-]+"),
    re.compile(r"eyJ[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*"),
    re.compile(r"(?i)(bearer\s+)[^\s\"',]+"),
    re.compile(r"(?i)((?:access|refresh|id)_token[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
)
_INTERNAL_URL = re.compile(r"https?://[A-Za-z0-9_\-]+(?::\d+)?/api/v\d+/")
_GENERIC_FAILURE = "Something went wrong. Please try again later."
_MESSAGE_KEYS = ("description", "message", "detail", "error")
_NOT_EXTRAS = {"error_code", "status", "status_code", "ok"}

# What a person can do about a refusal, by HTTP status (used when nothing more
# specific is known).
_STATUS_HINTS = {
    403: "Your account is not allowed to do this; ask the server's administrator.",
    404: "Check the name (and the project) with the matching 'list' command.",
    409: "The request conflicts with the current state; check it with 'arena experiments status'.",
    413: "The request or upload is larger than the server accepts; make it smaller.",
    422: "Fix the fields named above and submit again.",
    429: "Too many jobs or requests at once; wait for one to finish or stop one, then retry.",
    501: "This server does not offer this feature.",
}


def redact(text: str) -> str:
    """Return *text* with anything that looks like a credential replaced by ``***``."""
    for pattern in _SECRET_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + "***", text)
        else:
            text = pattern.sub("***", text)
    return text


def sanitise_message(message: str) -> str:
    """Hide messages that leak an internal service URL; scrub credentials."""
    if _INTERNAL_URL.search(message):
        return _GENERIC_FAILURE
    return redact(message)


class ArenaError(Exception):
    """Base class of every error raised by the Arena client, CLI and trainer."""

    _cli_mode: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        sdk_hint: str | None = None,
        cli_hint: str | None = None,
    ) -> None:
        self.message = redact(str(message))
        self.sdk_hint = sdk_hint
        self.cli_hint = cli_hint
        super().__init__(self.message)

    @classmethod
    def enable_cli_mode(cls) -> None:
        """Show hints phrased for the ``arena`` command line instead of for Python code."""
        ArenaError._cli_mode = True

    @property
    def hint(self) -> str | None:
        """The hint for the current mode (command line or Python), if any."""
        if ArenaError._cli_mode:
            return self.cli_hint or self.sdk_hint
        return self.sdk_hint or self.cli_hint

    def __str__(self) -> str:
        hint = self.hint
        return f"{self.message}\n{hint}" if hint else self.message


class ArenaConfigError(ArenaError):
    """Client configuration is missing or wrong (e.g. no project given and no default)."""


class ArenaFileNotFoundError(ArenaError, FileNotFoundError):
    """A local file the request needs does not exist."""


class ArenaImportError(ArenaError, ImportError):
    """An optional dependency is missing."""


class ArenaAuthError(ArenaError):
    """No usable credential, a rejected credential, or a failed login."""


class ArenaTimeoutError(ArenaAuthError):
    """A login did not complete in time (device code expired or deadline reached)."""


class ArenaAPIError(ArenaError):
    """The server refused a request or could not be reached (``status_code`` 0)."""

    label: ClassVar[str] = "API error"

    def __init__(
        self,
        detail: str,
        status_code: int = 0,
        extras: Mapping[str, JsonValue] | None = None,
        sdk_hint: str | None = None,
        cli_hint: str | None = None,
        error_code: str | None = None,
    ) -> None:
        self.detail = sanitise_message(str(detail))
        self.status_code = status_code
        self.extras = dict(extras or {})
        self.error_code = error_code
        if sdk_hint is None and cli_hint is None:
            sdk_hint = cli_hint = _STATUS_HINTS.get(status_code)
            if status_code >= 500 and sdk_hint is None:
                sdk_hint = cli_hint = "The server failed; try again later."
        super().__init__(self._render(), sdk_hint=sdk_hint, cli_hint=cli_hint)

    def _render(self) -> str:
        head = f"{self.label} ({self.status_code})" if self.status_code else self.label
        lines = [f"{head}: {self.detail}"]
        lines.extend(
            f"{_humanise(key)}: {_render_value(value)}" for key, value in self.extras.items()
        )
        return "\n".join(lines)

    @classmethod
    def from_response_body(cls, body: str | bytes, status_code: int = 0) -> ArenaAPIError:
        """Build the error from a raw (possibly non-JSON) error response body."""
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        parsed = parse_error_body(text)
        if parsed is None:
            return cls(text[:500].strip() or "(empty response)", status_code)
        return cls.from_payload(parsed, status_code)

    @classmethod
    def from_payload(cls, payload: Mapping[str, JsonValue], status_code: int = 0) -> ArenaAPIError:
        """Build the error from an already parsed error object."""
        message, key = _primary_message(payload)
        extras = {
            k: v
            for k, v in payload.items()
            if k != key and k not in _NOT_EXTRAS and v not in (None, "", [], {})
        }
        error_code = payload.get("error_code")
        target = cls
        if cls is ArenaTrainingError and _names_missing_environment(message):
            target = ArenaEnvironmentNotFoundError
        sdk_hint, cli_hint = _known_hints(message, error_code, extras)
        return target(
            message or "(no message)",
            status_code,
            extras,
            sdk_hint=sdk_hint,
            cli_hint=cli_hint,
            error_code=error_code if isinstance(error_code, str) else None,
        )


class ArenaValidationError(ArenaAPIError):
    """An environment or dataset failed server-side validation."""

    label = "ValidationError"


class ArenaEnvironmentNotFoundError(ArenaAPIError):
    """A manifest names an environment the server does not know."""

    label = "EnvironmentNotFoundError"


class ArenaInferenceError(ArenaAPIError):
    """A deployed agent failed to answer."""

    label = "InferenceError"


class ArenaTrainingError(ArenaAPIError):
    """A training job was refused."""

    label = "TrainingError"


_PATH_ERRORS: dict[str, type[ArenaAPIError]] = {
    "/api/cli/v1/environments/create-and-validate": ArenaValidationError,
    "/api/cli/v1/environments/validate": ArenaValidationError,
    "/api/cli/v1/environments/profile": ArenaValidationError,
    "/api/cli/v1/datasets/create": ArenaValidationError,
    "/api/cli/v1/experiments/jobs/submit": ArenaTrainingError,
}


def error_class_for_path(path: str) -> type[ArenaAPIError]:
    """The exception class for a failed request to *path* (exact path match)."""
    return _PATH_ERRORS.get(path, ArenaAPIError)


def parse_error_body(text: str) -> JsonObject | None:
    """Parse an error body tolerantly; ``None`` when no JSON object can be found.

    Accepts a JSON object, JSON whose strings contain raw newlines, or NDJSON (the
    first line that is an object carrying ``error``).
    """
    for candidate in (text, text.replace("\n", " ").replace("\r", " ")):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        return _unnest(value) if isinstance(value, dict) else None
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and "error" in value:
            return _unnest(value)
    return None


def _unnest(payload: JsonObject) -> JsonObject:
    """Open one level of a JSON document encoded as a string inside a message key."""
    for key in _MESSAGE_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                inner = json.loads(value)
            except ValueError:
                continue
            if isinstance(inner, dict):
                merged = {k: v for k, v in payload.items() if k != key}
                merged.update(inner)
                return merged
    return payload


def _primary_message(payload: Mapping[str, JsonValue]) -> tuple[str, str | None]:
    for key in _MESSAGE_KEYS:
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip(), key
    return "", None


def _names_missing_environment(message: str) -> bool:
    lowered = message.lower()
    return "not found" in lowered and "environment" in lowered


def _known_hints(
    message: str, error_code: JsonValue, extras: Mapping[str, JsonValue]
) -> tuple[str | None, str | None]:
    if error_code == "AMBIGUOUS_ENTRYPOINT" and isinstance(
        extras.get("available_entrypoints"), list
    ):
        assert isinstance(extras["available_entrypoints"], list)  # checked just above
        choices = ", ".join(str(e) for e in extras["available_entrypoints"])
        return (
            f"Pass entrypoint= with one of: {choices}",
            f"Pass --entrypoint with one of: {choices}",
        )
    if _names_missing_environment(message):
        return (
            "List the environments you can use with "
            "ArenaClient().list_environments(include_arena=True).",
            "List the environments you can use with 'arena env list --include-arena'.",
        )
    return None, None


def _humanise(key: str) -> str:
    words = key.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def _render_value(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, default=str)
    return redact(str(value))
