"""The run's event log: ``RUN_DIR/events.jsonl``, the population's history as it happens.

One JSON object per line (format version :data:`EVENTS_VERSION`, documented in
``docs/run-events.md``, JSON Schema ``schemas/run_events.schema.json``, shipped as
``agilerl/schemas/run_events.schema.json``). Every line is appended with one ``write`` of
the whole line on a file opened for appending, so a reader sees whole lines, except perhaps
a partial last one while a run writes (readers skip lines that do not parse).

A resumed run keeps the events up to the generation of the checkpoint it resumes from and
drops the later ones (it writes them again), so each generation is told once.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import overload

from agilerl.core.value_types import JsonObject, JsonValue
from agilerl.logging.base import as_scalar
from agilerl.run_folder import EVENTS_FILE

__all__ = [
    "EVENTS_FILE",
    "EVENTS_VERSION",
    "RunEventLog",
    "event_generation",
    "jsonable",
    "read_events",
]

EVENTS_VERSION = 1


@overload
def jsonable(value: Mapping[str, object]) -> JsonObject: ...


@overload
def jsonable(value: object) -> JsonValue: ...


def jsonable(value: object) -> JsonValue:
    """``value`` as JSON: non-finite numbers become null, NumPy/torch scalars numbers,
    tuples lists, mapping keys strings, anything else its ``str``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if type(value).__name__ == "bool_":  # NumPy's bool is no int: keep it a boolean
        return bool(value)
    scalar = as_scalar(value)
    if scalar is not None:
        if not math.isfinite(scalar):
            return None
        integral = isinstance(value, int) or type(value).__name__.startswith(("int", "uint"))
        return int(scalar) if integral else scalar
    return str(value)


def utc_now() -> str:
    """The current time as ISO 8601 UTC with milliseconds (``2026-12-02T16:40:00.123Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def event_generation(event: Mapping[str, object]) -> int | None:
    """The generation an event belongs to (``run_end``: the generations done; ``run_start``:
    those done before it started); None for an event without one."""
    value = event.get("generations" if event.get("event") == "run_end" else "generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_events(path: str | os.PathLike[str]) -> list[JsonObject]:
    """The events of a run folder (or of an ``events.jsonl`` file), in order; lines that do
    not parse as a JSON object (a run writing its last line) are skipped. A missing file
    has no events."""
    target = Path(path)
    if target.is_dir():
        target = target / EVENTS_FILE
    if not target.is_file():
        return []
    events: list[JsonObject] = []
    for line in target.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


class RunEventLog:
    """Appends events to ``folder/events.jsonl``; does nothing when ``folder`` is None.

    Args:
        folder: the run folder (None: no event log, every call is a no-op).
        keep_until_generation: None for a new run (an existing file is replaced); for a
            resumed run, the generation of its checkpoint: later events are dropped.
    """

    def __init__(self, folder: str | os.PathLike[str] | None,
                 keep_until_generation: int | None = None) -> None:
        self.path = Path(folder) / EVENTS_FILE if folder is not None else None
        self._fd: int | None = None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep_until_generation is None:
            self.path.unlink(missing_ok=True)
        elif self.path.is_file():
            self._keep_until(keep_until_generation)

    def emit(self, event: str, **fields: object) -> None:
        """Append one ``event`` with ``fields`` (made JSON with :func:`jsonable`)."""
        if self.path is None:
            return
        record = {"v": EVENTS_VERSION, "event": event, "time": utc_now(), **jsonable(fields)}
        data = (json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n").encode()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        written = os.write(self._fd, data)
        while written < len(data):  # only a full disk or a signal splits a regular write
            written += os.write(self._fd, data[written:])

    def close(self) -> None:
        """Close the file; safe to call twice."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _keep_until(self, generation: int) -> None:
        """Rewrite the file, atomically, without the events after ``generation`` (and
        without a torn last line)."""
        assert self.path is not None
        events = read_events(self.path)
        kept = [e for e in events if (event_generation(e) or 0) <= generation]
        text = self.path.read_bytes()
        if len(kept) == len(events) and (not text or text.endswith(b"\n")):
            return
        _replace(self.path, (json.dumps(e, separators=(",", ":")) + "\n" for e in kept))


def _replace(path: Path, lines: Iterable[str]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".events-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
