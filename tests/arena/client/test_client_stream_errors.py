"""NDJSON classification and error-body parsing."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from agilerl.arena.errors import (
    ArenaAPIError,
    ArenaEnvironmentNotFoundError,
    ArenaError,
    ArenaTrainingError,
    ArenaValidationError,
    parse_error_body,
    redact,
)
from agilerl.arena.stream import (
    CheckEvent,
    ErrorEvent,
    LogEvent,
    NDJsonStream,
    StatusEvent,
    classify_line,
)


def stream_of(chunks: list[bytes], path: str = "/api/cli/v1/experiments/jobs/submit"):
    class Chunked(httpx.SyncByteStream):
        def __iter__(self):
            yield from chunks

    response = httpx.Response(200, stream=Chunked())
    return NDJsonStream(response, path)


def test_line_classification() -> None:
    assert classify_line("   ") is None
    assert classify_line("plain text") == LogEvent("plain text")
    assert classify_line("[1, 2]") == LogEvent("[1, 2]")
    status = classify_line('{"kind":"status","stage":"upload","status":"running","message":"m"}')
    assert isinstance(status, StatusEvent) and status.stage == "upload"
    warn = classify_line('{"kind":"warning","stage":"s","status":"running","message":"w"}')
    assert isinstance(warn, StatusEvent) and warn.kind == "warning"
    failed = classify_line(
        json.dumps(
            {
                "kind": "status",
                "status": "failed",
                "message": "no",
                "detail": {"error_code": "INSTALL_FAILED", "log": "pip", "empty": ""},
            }
        )
    )
    assert failed == ErrorEvent("no", {"log": "pip"}, "INSTALL_FAILED", "")
    check = classify_line(
        json.dumps(
            {
                "kind": "check",
                "detail": {
                    "check": "Reset",
                    "result": {"success": False, "warnings": ["w"], "error msg": "bad reset"},
                },
            }
        )
    )
    assert check == CheckEvent("Reset", False, ["w"], "bad reset")
    log = classify_line('{"kind":"log","message":"step 5","detail":{"seq":5}}')
    assert log == LogEvent("step 5", {"seq": 5})
    internal = classify_line(
        '{"kind":"status","status":"failed","message":"GET http://jobs-svc:8080/api/v1/x failed"}'
    )
    assert isinstance(internal, ErrorEvent) and "jobs-svc" not in internal.message


def test_chunks_split_across_lines_and_trailing_line() -> None:
    first = b'{"kind":"status","stage":"a","status":"running","message":"one"}\n{"kind":"sta'
    second = b'tus","stage":"b","status":"completed","message":"x","detail":{"id":1}}\n\n'
    third = b'{"kind":"status","stage":"c","status":"completed","message":"no detail"}'
    stream = stream_of([first, second, third])
    events = list(stream)
    assert [e.stage for e in events] == ["a", "b", "c"]
    assert stream.result == {"id": 1}  # the last *completed with detail* wins
    assert list(stream) == []  # a second pass yields nothing


def test_collect_raises_the_path_error_and_promotes_missing_environment() -> None:
    line = b'{"kind":"status","status":"failed","message":"Environment \'X\' not found"}\n'
    with pytest.raises(ArenaEnvironmentNotFoundError):
        stream_of([line]).collect()
    other = b'{"kind":"status","status":"failed","message":"quota exceeded"}\n'
    with pytest.raises(ArenaTrainingError):
        stream_of([other]).collect()
    with pytest.raises(ArenaValidationError):
        stream_of([line], "/api/cli/v1/environments/validate").collect()


def test_single_document_fallback_and_empty_body() -> None:
    assert stream_of([b'{"ok": true,\n "data": {"accepted": true}}']).collect() == {
        "accepted": True
    }
    assert stream_of([b""]).collect() == {}


def test_error_body_parsing_variants() -> None:
    assert parse_error_body('{"error": "x"}') == {"error": "x"}
    assert parse_error_body('{"error": "line\nbreak"}') == {"error": "line break"}
    assert parse_error_body('noise\n{"error": "in ndjson"}\n') == {"error": "in ndjson"}
    nested = parse_error_body(json.dumps({"detail": json.dumps({"message": "inner", "a": 1})}))
    assert nested == {"message": "inner", "a": 1}
    assert parse_error_body("<html>oops</html>") is None


def test_error_rendering_extras_and_hints() -> None:
    err = ArenaValidationError.from_payload(
        {
            "ok": False,
            "error": "Several entry points",
            "error_code": "AMBIGUOUS_ENTRYPOINT",
            "available_entrypoints": ["m:A", "m:B"],
        },
        422,
    )
    text = str(err)
    assert text.startswith("ValidationError (422): Several entry points")
    assert "Available entrypoints: m:A, m:B" in text
    assert "entrypoint= with one of: m:A, m:B" in text
    assert "AMBIGUOUS_ENTRYPOINT" not in text and err.error_code == "AMBIGUOUS_ENTRYPOINT"
    plain = ArenaAPIError.from_response_body(b"<html>bad gateway</html>", 502)
    assert "API error (502): <html>bad gateway</html>" in str(plain)
    assert "try again later" in str(plain)
    assert "try again" not in str(ArenaAPIError.from_payload({"error": "no uploads"}, 501))
    assert "429" in str(ArenaAPIError.from_payload({"error": "slow"}, 429))
    assert "stop one" in str(ArenaAPIError.from_payload({"error": "slow"}, 429))


def test_cli_mode_switches_hints() -> None:
    code = (
        "from agilerl.arena.errors import ArenaError, ArenaConfigError\n"
        "e = ArenaConfigError('x', sdk_hint='python hint', cli_hint='cli hint')\n"
        "print(str(e)); ArenaError.enable_cli_mode(); print(str(e))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["x", "python hint", "x", "cli hint"]


def test_secrets_are_redacted_everywhere() -> None:
    jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.c2ln"
    text = f"token arena_pat_1234_abcd and Bearer xyz123 and {jwt} access_token=foo"
    cleaned = redact(text)
    for secret in ("arena_pat_1234_abcd", "xyz123", jwt, "foo"):
        assert secret not in cleaned
    err = ArenaError(f"bad credential arena_pat_9_secret for {jwt}")
    assert "secret" not in str(err) and jwt not in repr(err)
