"""Reading NDJSON event streams sent by Arena (validation, submission, logs).

Each line of the response body is one JSON envelope
``{"kind", "stage", "status", "message", "level"?, "detail"?}``. Lines are parsed as
they arrive (a job's log can stream for hours), classified into events, and the
stream remembers the first failure and the last ``completed`` status carrying a
``detail``, which is the result of the whole request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agilerl.arena.errors import ArenaAPIError, error_class_for_path, sanitise_message

if TYPE_CHECKING:
    import httpx

    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = [
    "CheckEvent",
    "ErrorEvent",
    "Event",
    "LogEvent",
    "NDJsonStream",
    "StatusEvent",
    "StreamInterrupted",
    "classify_line",
]

_FALLBACK_LIMIT = 1 << 20  # keep at most 1 MiB of body for the single-document fallback


@dataclass(frozen=True)
class LogEvent:
    """A line of text (a job's log line, or anything that is not an envelope)."""

    text: str
    detail: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class StatusEvent:
    """Progress of a stage (``started``/``running``/``completed``)."""

    stage: str
    status: str
    message: str
    detail: JsonObject = field(default_factory=dict)
    level: str = "info"
    kind: str = "status"


@dataclass(frozen=True)
class CheckEvent:
    """The outcome of one validation check."""

    name: str
    success: bool | None
    warnings: list[JsonValue] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class ErrorEvent:
    """A failed stage; ends the request in failure."""

    message: str
    extras: JsonObject = field(default_factory=dict)
    error_code: str | None = None
    stage: str = ""


Event = LogEvent | StatusEvent | CheckEvent | ErrorEvent


class StreamInterrupted(ArenaAPIError):
    """The connection broke while a streamed answer was being read."""


def classify_line(line: str) -> Event | None:
    """Turn one body line into an event (``None`` for a blank line)."""
    line = line.strip()
    if not line:
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return LogEvent(text=line)
    if not isinstance(value, dict):
        return LogEvent(text=json.dumps(value))
    return _classify_object(value)


def _classify_object(value: JsonObject) -> Event:
    kind = value.get("kind")
    raw_detail = value.get("detail")
    detail: JsonObject = raw_detail if isinstance(raw_detail, dict) else {}
    if kind in ("status", "warning"):
        if value.get("status") == "failed":
            code = detail.get("error_code")
            extras: JsonObject = {
                k: v for k, v in detail.items() if k != "error_code" and v not in (None, "", [], {})
            }
            return ErrorEvent(
                message=sanitise_message(str(value.get("message") or "Request failed.")),
                extras=extras,
                error_code=code if isinstance(code, str) else None,
                stage=str(value.get("stage") or ""),
            )
        return StatusEvent(
            stage=str(value.get("stage") or ""),
            status=str(value.get("status") or ""),
            message=str(value.get("message") or ""),
            detail=detail,
            level=str(value.get("level") or "info"),
            kind=str(kind),
        )
    if kind == "check" and isinstance(detail.get("result"), dict):
        result = detail["result"]
        assert isinstance(result, dict)  # checked just above
        success = result.get("success")
        warnings = result.get("warnings")
        error = result.get("error msg") or result.get("error")
        return CheckEvent(
            name=str(detail.get("check") or ""),
            success=success if isinstance(success, bool) else None,
            warnings=list(warnings) if isinstance(warnings, list) else [],
            error=str(error) if error else None,
        )
    if kind == "check":
        return StatusEvent(
            stage=str(value.get("stage") or ""),
            status=str(value.get("status") or ""),
            message=str(value.get("message") or ""),
            detail=detail,
            kind="check",
        )
    if kind == "log":
        return LogEvent(text=str(value.get("message") or ""), detail=detail)
    return LogEvent(text=json.dumps(value))


class NDJsonStream:
    """Iterate the events of a streamed response; ``collect()`` returns its result.

    :param response: An httpx response opened with ``stream=True`` (status already checked).
    :param path: The request path (chooses the exception class on failure).
    :param handler: Called with every event as it is read.
    """

    def __init__(
        self,
        response: httpx.Response,
        path: str,
        handler: Callable[[Event], None] | None = None,
    ) -> None:
        self._response = response
        self._path = path
        self._handler = handler
        self._consumed = False
        self._raw: list[str] = []
        self._raw_size = 0
        self.result: JsonObject | None = None
        self.error: ErrorEvent | None = None

    def __enter__(self) -> NDJsonStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying response (idempotent)."""
        self._response.close()

    def __iter__(self) -> Iterator[Event]:
        if self._consumed:
            return
        self._consumed = True
        try:
            for line in self._lines():
                event = classify_line(line)
                if event is None:
                    continue
                self._track(event)
                if self._handler is not None:
                    self._handler(event)
                yield event
        finally:
            self.close()

    def _lines(self) -> Iterator[str]:
        import httpx

        pending = ""
        chunks = self._response.iter_text()
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except httpx.HTTPError as exc:
                raise StreamInterrupted(
                    f"Network error while reading the answer: {type(exc).__name__}: {exc}", 0
                ) from None
            if self._raw_size < _FALLBACK_LIMIT:
                self._raw.append(chunk)
                self._raw_size += len(chunk)
            pending += chunk
            *complete, pending = pending.split("\n")
            yield from complete
        if pending.strip():
            yield pending

    def _track(self, event: Event) -> None:
        if isinstance(event, ErrorEvent) and self.error is None:
            self.error = event
        elif isinstance(event, StatusEvent) and event.status == "completed" and event.detail:
            self.result = event.detail

    def collect(self) -> JsonObject:
        """Drain the stream and return its result; raise the path's error on a failure."""
        for _ in self:
            pass
        if self.error is not None:
            payload: JsonObject = {"message": self.error.message, **self.error.extras}
            if self.error.error_code:
                payload["error_code"] = self.error.error_code
            raise error_class_for_path(self._path).from_payload(payload, 0)
        if self.result is not None:
            return self.result
        return _single_document("".join(self._raw))


def _single_document(text: str) -> JsonObject:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    if isinstance(value, dict) and value.get("ok") is True and "data" in value:
        value = value["data"]
    if isinstance(value, dict) and value.get("ok") is False:
        raise ArenaAPIError.from_payload(value, 0)
    return value if isinstance(value, dict) else {}
