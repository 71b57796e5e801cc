"""Read the files of one run folder: ``metrics.csv``, ``events.jsonl``, ``manifest.yaml`` and
the checkpoint folders, each parsed once per change of the file (size and mtime).

A run may be writing while these are read: a partial last CSV row or event line is skipped
(the next poll sees it whole), and every number that is not finite becomes ``None`` because
JSON has no NaN.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast, overload

from agilerl.run_folder import (
    CHECKPOINTS_DIR,
    ELITE_FILE,
    EVENTS_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
)

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = [
    "CHECKPOINTS_DIR", "ELITE_FILE", "EVENTS_FILE", "MANIFEST_FILE", "METRICS_FILE",
    "MAX_TEXT_BYTES", "Metrics", "file_id", "list_checkpoints", "parse_events",
    "parse_manifest", "parse_metrics", "read_events", "read_manifest", "read_metrics",
]

CHECKPOINT_INDEX = "index.json"
#: the manifest shown on a run page is cut at this size (a resolved manifest is a few KiB).
MAX_TEXT_BYTES = 1 << 20

T = TypeVar("T")
#: each kind of file is always parsed by the same function, so its entries hold its type.
_cache: dict[tuple[str, str], tuple[tuple[int, int], object]] = {}
_cache_lock = threading.Lock()


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def file_id(path: Path) -> str | None:
    """Which file ``path`` is (device and inode): writers append in place but replace the
    file when they rewrite it (a resumed run drops rows and events past its checkpoint), so
    a reader that sees the id change must read it again from the start."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return f"{stat.st_dev}:{stat.st_ino}"


def _cached(kind: str, path: Path, parse: Callable[[Path], T], empty: T) -> T:
    """``parse(path)``, reused while the file's size and mtime stay the same."""
    signature = _signature(path)
    if signature is None:
        return empty
    key = (kind, str(path))
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == signature:
        return cast(T, hit[1])
    try:
        value = parse(path)
    except OSError:
        return empty
    with _cache_lock:
        _cache[key] = (signature, value)
    return value


class Metrics:
    """``metrics.csv`` as columns of numbers: ``rows[i][j]`` is column ``columns[j]`` of
    generation ``i`` (``None`` for an empty, non-numeric or non-finite cell)."""

    def __init__(self, columns: list[str], rows: list[list[float | None]]):
        self.columns = columns
        self.rows = rows

    def column(self, name: str) -> list[float | None]:
        """One column's values, ``[]`` when the file has no such column."""
        if name not in self.columns:
            return []
        j = self.columns.index(name)
        return [row[j] for row in self.rows]

    def last(self, name: str) -> float | None:
        """The column's last value that is a number."""
        return next((v for v in reversed(self.column(name)) if v is not None), None)


def _number(cell: str) -> float | None:
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_metrics(text: str) -> Metrics:
    """``metrics.csv``'s text as :class:`Metrics` (a host reading the file its own way, like
    the Arena server's no-follow reads, parses it with this)."""
    complete = text.endswith("\n")
    lines = list(csv.reader(io.StringIO(text)))
    if not lines:
        return Metrics([], [])
    if not complete and len(lines) > 1:
        lines.pop()  # a row being written: the next poll reads it whole
    columns, body = lines[0], lines[1:]
    width = len(columns)
    rows = [[_number(cell) for cell in (row + [""] * width)[:width]] for row in body if row]
    return Metrics(columns, rows)


def _parse_metrics(path: Path) -> Metrics:
    return parse_metrics(path.read_text(encoding="utf-8", errors="replace"))


def read_metrics(run: Path) -> Metrics:
    """The run's ``metrics.csv`` (empty when it has none yet)."""
    return _cached("metrics", run / METRICS_FILE, _parse_metrics, Metrics([], []))


@overload
def _finite(value: JsonObject) -> JsonObject: ...
@overload
def _finite(value: JsonValue) -> JsonValue: ...
def _finite(value: JsonValue) -> JsonValue:
    """``value`` with every non-finite float replaced by ``None`` (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def parse_events(lines: Iterable[bytes]) -> list[JsonObject]:
    """The events among ``events.jsonl``'s lines; a line that is not an event is skipped."""
    events: list[JsonObject] = []
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a line being written, or damage: skip it, keep the rest
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            events.append(_finite(event))
    return events


def _parse_events(path: Path) -> list[JsonObject]:
    with path.open("rb") as handle:
        return parse_events(handle)


def read_events(run: Path) -> list[JsonObject]:
    """The run's events in file order (``[]`` when it records none)."""
    return _cached("events", run / EVENTS_FILE, _parse_events, [])


def parse_manifest(raw: bytes) -> tuple[str, JsonObject]:
    """The text (cut at :data:`MAX_TEXT_BYTES`; pass up to one byte more to have the cut
    noted) and parsed mapping of a manifest's bytes."""
    import yaml

    text = raw[:MAX_TEXT_BYTES].decode("utf-8", errors="replace")
    if len(raw) > MAX_TEXT_BYTES:
        return text + "\n# ... cut: the file is larger than 1 MiB\n", {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    return text, data if isinstance(data, dict) else {}


def _parse_manifest(path: Path) -> tuple[str, JsonObject]:
    with path.open("rb") as handle:
        return parse_manifest(handle.read(MAX_TEXT_BYTES + 1))


def read_manifest(run: Path) -> tuple[str, JsonObject]:
    """The resolved manifest's text and its parsed mapping (``{}`` when it does not parse)."""
    empty: tuple[str, JsonObject] = ("", {})
    return _cached("manifest", run / MANIFEST_FILE, _parse_manifest, empty)


def _checkpoint_summary(folder: Path) -> JsonObject | None:
    """What ``index.json`` says of a finished checkpoint; ``None`` for an unfinished one."""
    try:
        index = json.loads((folder / CHECKPOINT_INDEX).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    summary = index.get("summary") if isinstance(index, dict) else None
    return summary if isinstance(summary, dict) else {}


def list_checkpoints(run: Path) -> list[JsonObject]:
    """Finished checkpoint folders under ``run/checkpoints`` (oldest first), with their
    files; a folder still being written (no ``index.json``) is left out."""
    root = run / CHECKPOINTS_DIR
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    found: list[JsonObject] = []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        summary = _checkpoint_summary(Path(entry.path))
        if summary is None:
            continue
        files: list[JsonValue] = [{"name": f.name, "bytes": f.stat().st_size}
                 for f in sorted(os.scandir(entry.path), key=lambda f: f.name)
                 if f.is_file(follow_symlinks=False)]
        found.append({"name": entry.name, "path": f"{CHECKPOINTS_DIR}/{entry.name}",
                      "generation": _finite(summary.get("generation")),
                      "env_steps": _finite(summary.get("global_step")),
                      "elite_member": _finite(summary.get("elite_member")),
                      "files": files, "time": entry.stat().st_mtime})
    return found
