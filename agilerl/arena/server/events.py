"""One line of an NDJSON progress stream (spec arena-api §1.4)."""

from __future__ import annotations

import json
from collections.abc import Mapping

NDJSON = "application/x-ndjson"


def event(kind: str, stage: str, status: str, message: str,
          detail: Mapping[str, object] | None = None, level: str | None = None) -> bytes:
    """``{"kind", "stage", "status", "message"[, "detail"][, "level"]}`` and a newline."""
    line: dict[str, object] = {"kind": kind, "stage": stage, "status": status, "message": message}
    if detail is not None:
        line["detail"] = detail
    if level is not None:
        line["level"] = level
    return (json.dumps(line, default=str) + "\n").encode()
