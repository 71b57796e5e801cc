"""One user's experiments in the shape of the dashboard's run API (:mod:`agilerl.dashboard.api`),
so the Arena server's pages reuse the dashboard's run views.

The dashboard reads run folders with plain ``open``; an experiment folder is the job's to
write, so here every file is reached through :mod:`.nofollow` from the experiment's own
folder (a ``run/metrics.csv`` that is a link to ``jwt_secret`` is refused, never read) and
parsed with the dashboard's parsers. What the server knows for certain (name, state,
algorithm, steps) comes from its database row, never from the job's files.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar, cast

import yaml

from agilerl.arena.server import nofollow, states
from agilerl.arena.server.runs import RunDir
from agilerl.arena.server.store import Row
from agilerl.dashboard.readers import (
    ELITE_FILE,
    EVENTS_FILE,
    MANIFEST_FILE,
    MAX_TEXT_BYTES,
    Metrics,
    parse_events,
    parse_manifest,
    parse_metrics,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agilerl.core.value_types import JsonObject, JsonValue

T = TypeVar("T")
#: files of the trainer's run folder (``run/``) a page may download.
DOWNLOADABLE = ("metrics.csv", EVENTS_FILE, MANIFEST_FILE, ELITE_FILE)
#: a metrics or events file larger than this is not parsed for the pages: a long run's
#: files are a few MiB, and parsing is held in the server's memory (a job could write a
#: huge file to exhaust it). Past this the download is the way to read them.
MAX_PARSED_BYTES = 16 << 20
#: how many parsed files are kept (a user's page polls one run, a list reads every run).
CACHE_ENTRIES = 512
#: bytes of log shown when a page first opens a job's log (older lines are skipped).
LOG_TAIL_BYTES = 64 << 10
CHUNK = 1 << 16

#: each file is always parsed by the same function, so its entry holds that function's type.
_cache: OrderedDict[tuple[str, str], tuple[tuple[int, int, int], object]] = OrderedDict()
_lock = threading.Lock()


def _parsed(run: RunDir, rel: str, parse: Callable[[bytes], T], empty: T) -> T:
    """``parse`` of ``run.root/rel``'s bytes, reused while the file is unchanged; ``empty``
    when it is missing, not a regular file reached without links, or too large."""
    try:
        with nofollow.open_file(run.root, rel) as handle:
            stat = os.fstat(handle.fileno())
            signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            key = (str(run.root), rel)
            with _lock:
                hit = _cache.get(key)
            if hit is not None and hit[0] == signature:
                return cast(T, hit[1])
            if stat.st_size > MAX_PARSED_BYTES:
                return empty
            data = handle.read(MAX_PARSED_BYTES)
    except OSError:
        return empty
    value = parse(data)
    with _lock:
        _cache[key] = (signature, value)
        _cache.move_to_end(key)
        while len(_cache) > CACHE_ENTRIES:
            _cache.popitem(last=False)
    return value


def metrics_of(run: RunDir) -> Metrics:
    rel = run.metrics_file()
    if rel is None:
        return Metrics([], [])
    return _parsed(run, rel, lambda data: parse_metrics(data.decode("utf-8", "replace")),
                   Metrics([], []))


def events_of(run: RunDir) -> list[JsonObject]:
    return _parsed(run, f"run/{EVENTS_FILE}", lambda data: parse_events(data.splitlines()), [])


def file_signature(run: RunDir, rel: str) -> str | None:
    """Which file ``rel`` is now (a rewrite on resume changes it; the page reads again)."""
    found = nofollow.entry(run.root, rel)
    if found is None or found.kind != "file":
        return None
    try:
        with nofollow.open_file(run.root, rel) as handle:
            stat = os.fstat(handle.fileno())
    except OSError:
        return None
    return f"{stat.st_dev}:{stat.st_ino}"


def _epoch(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _best(metrics: Metrics, events: list[JsonObject]) -> float | None:
    column = [v for v in metrics.column("eval/best_fitness") if v is not None]
    if column:
        return max(column)
    ends = [e.get("best_fitness") for e in events if e.get("event") == "run_end"]
    found = [v for v in ends if isinstance(v, int | float) and not isinstance(v, bool)]
    return float(found[-1]) if found else None


def summary(row: Row, run: RunDir, now: float) -> JsonObject:
    """The runs-list row of one experiment (the dashboard's keys, plus the job's)."""
    metrics = metrics_of(run)
    events = events_of(run)
    started = _epoch(row["started_at"])
    finished = _epoch(row["finished_at"])
    live = row["state"] in states.LIVE
    updated = now if live else finished or _epoch(row["created_at"])
    wall = None if started is None else (now if live else finished or now) - started
    return {
        "id": str(row["id"]), "name": row["name"], "folder": f"project {row['project']}",
        "algorithm": row["algorithm"], "env": row["environment"], "pop_size": row["pop_size"],
        "status": str(row["state"]).lower(), "best_fitness": _best(metrics, events),
        "steps": metrics.last("train/global_step"),
        "generations": int(metrics.last("train/generation") or len(metrics.rows)),
        "started": started, "updated": updated, "wall_seconds": wall,
        "has_events": bool(events),
        # the job's own fields, for the job controls
        "experiment_name": row["name"], "project": row["project"], "state": row["state"],
        "agent_steps": row["steps"], "max_steps": row["max_steps"], "attempt": row["attempt"],
        "error": row["error"],
    }


def manifest_text(run: RunDir, server_copy: Mapping[str, JsonValue]) -> str:
    """The trainer's resolved manifest when it wrote one, else the server's copy."""
    text = _parsed(run, f"run/{MANIFEST_FILE}",
                   lambda data: parse_manifest(data[:MAX_TEXT_BYTES + 1])[0], "")
    if text:
        return text
    return "# the manifest as submitted (the trainer has not written its resolved copy yet)\n" \
        + yaml.safe_dump(server_copy, sort_keys=False)


def checkpoints(run: RunDir) -> list[JsonObject]:
    """The experiment's finished checkpoints in the dashboard's shape."""
    return [{"name": c.name, "path": f"checkpoints/{c.name}", "generation": c.generation,
             "env_steps": c.total_steps, "elite_member": c.elite_member,
             "files": [{"name": "all", "bytes": int(c.size_mb * 1e6)}],
             "time": _epoch(c.created_at)} for c in run.list_checkpoints()]


def files(run: RunDir) -> list[str]:
    found = []
    for name in DOWNLOADABLE:
        entry = nofollow.entry(run.root, f"run/{name}")
        if entry is not None and entry.kind == "file":
            found.append(name)
    return found


def stream_file(run: RunDir, rel: str) -> tuple[int, Iterator[bytes]]:
    """``rel``'s size and its bytes in chunks, read from a descriptor opened without
    following links (so the file read is the one checked).

    :raises OSError: it is missing, a link or not a regular file.
    """
    handle = nofollow.open_file(run.root, rel)
    size = os.fstat(handle.fileno()).st_size

    def chunks() -> Iterator[bytes]:
        with handle:
            left = size
            while left > 0 and (chunk := handle.read(min(CHUNK, left))):
                left -= len(chunk)
                yield chunk

    return size, chunks()


def log_page(run: RunDir, offset: int) -> JsonObject:
    """Log lines from byte ``offset`` (``-1``: the last :data:`LOG_TAIL_BYTES`)."""
    size = run.log_size()
    start = max(0, size - LOG_TAIL_BYTES) if offset < 0 else min(offset, size)
    skipped = start > 0 and offset < 0
    # a line cut by the tail's start is not a JSON object: the reader drops it
    entries, after = run.read_logs(start)
    lines: list[JsonValue] = [{"seq": e.get("seq"), "ts": e.get("ts"), "stream": str(e.get("stream", "")),
              "message": str(e.get("message", ""))} for e in entries]
    return {"lines": lines, "offset": after, "size": size, "skipped": skipped}
