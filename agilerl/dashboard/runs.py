"""The run folders under the dashboard's RUNS_DIRs: which they are, their ids, and a one-line
summary of each (algorithm, environment, status, best fitness, steps, wall time).

A run folder is a folder holding ``manifest.yaml``, ``metrics.csv`` or ``events.jsonl``; a
RUNS_DIR may be one itself. Folders are found by walking down at most
:data:`SEARCH_DEPTH` levels without following symbolic links, so nothing outside the given
folders is ever reached through a run id: an id is only looked up, never joined to a path.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from agilerl.dashboard.readers import (
    CHECKPOINTS_DIR,
    ELITE_FILE,
    EVENTS_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    read_events,
    read_manifest,
    read_metrics,
)

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject, JsonValue

__all__ = ["LIVE_SECONDS", "SEARCH_DEPTH", "RunFolder", "RunsIndex", "summarize"]

#: how many folder levels below a RUNS_DIR are searched for run folders.
SEARCH_DEPTH = 3
#: a run without a recorded end that wrote within this many seconds (or three of its
#: generations, when those are slower) counts as running.
LIVE_SECONDS = 120.0
#: a folder scan is reused for this long (the page polls every couple of seconds).
SCAN_SECONDS = 1.0
RUN_FILES = (MANIFEST_FILE, METRICS_FILE, EVENTS_FILE)
_SKIP = {CHECKPOINTS_DIR, "tensorboard", "wandb", "__pycache__", "node_modules"}


@dataclass(frozen=True)
class RunFolder:
    """One run folder: ``id`` names it in URLs, ``path`` is where it lies."""

    id: str
    path: Path
    root: Path

    @property
    def name(self) -> str:
        return self.path.name


def _is_run(folder: str) -> bool:
    return any(os.path.isfile(os.path.join(folder, name)) for name in RUN_FILES)


def _walk(root: Path, depth: int) -> list[Path]:
    """Run folders at most ``depth`` levels below ``root`` (a run's own subfolders are not
    searched: checkpoints and TensorBoard logs live there)."""
    found: list[Path] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith(".") or entry.name in _SKIP:
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        if _is_run(entry.path):
            found.append(Path(entry.path))
        elif depth > 1:
            found.extend(_walk(Path(entry.path), depth - 1))
    return found


class RunsIndex:
    """The run folders under ``roots``, rescanned at most once per :data:`SCAN_SECONDS`."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]]):
        self.roots = [Path(root).resolve() for root in roots]
        self._lock = threading.Lock()
        self._scanned_at = -SCAN_SECONDS
        self._runs: dict[str, RunFolder] = {}

    def _scan(self) -> dict[str, RunFolder]:
        runs: dict[str, RunFolder] = {}
        several = len(self.roots) > 1
        for number, root in enumerate(self.roots):
            prefix = f"{number}/" if several else ""
            if _is_run(str(root)):
                runs[prefix + root.name] = RunFolder(prefix + root.name, root, root)
                continue
            for path in _walk(root, SEARCH_DEPTH):
                run_id = prefix + path.relative_to(root).as_posix()
                runs[run_id] = RunFolder(run_id, path, root)
        return runs

    def runs(self) -> list[RunFolder]:
        """Every run folder, in a stable order."""
        with self._lock:
            now = time.monotonic()
            if now - self._scanned_at >= SCAN_SECONDS:
                self._runs = self._scan()
                self._scanned_at = now
            return list(self._runs.values())

    def find(self, run_id: str) -> RunFolder | None:
        """The run with this id, or ``None`` (an id is never turned into a path)."""
        match = next((run for run in self.runs() if run.id == run_id), None)
        if match is None and run_id not in self._runs:
            with self._lock:  # a run that appeared since the last scan
                self._scanned_at = -SCAN_SECONDS
            match = next((run for run in self.runs() if run.id == run_id), None)
        return match


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _iso_seconds(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _active_seconds(events: list[JsonObject]) -> float | None:
    """Seconds the run trained: each part (a start or resume, to its last event) summed, so
    the time a stopped run waited before it was resumed does not count."""
    total, start, last = 0.0, None, None
    for event in events:
        moment = _iso_seconds(event.get("time"))
        if moment is None:
            continue
        if event.get("event") == "run_start":
            if start is not None and last is not None:
                total += last - start
            start = moment
        last = moment
    if start is None or last is None:
        return None
    return total + last - start


class _Told(TypedDict, total=False):
    """What the event log says of a run (:func:`_from_events`); a key is absent when no
    event says it."""

    algorithm: str | None
    env: str | None
    pop_size: JsonValue
    started: float | None
    active_seconds: float | None
    status: str | None
    best_fitness: JsonValue


def _from_events(events: list[JsonObject]) -> _Told:
    """What the event log says of the run as a whole (it may hold several start ... end
    parts: one per start or resume)."""
    start = next((e for e in events if e.get("event") == "run_start"), None)
    last_start = max((i for i, e in enumerate(events) if e.get("event") == "run_start"),
                     default=-1)
    end = next((e for e in reversed(events[last_start + 1:]) if e.get("event") == "run_end"),
               None)  # an end before the last start was resumed from: the run goes on
    found: _Told = {}
    if start is not None:
        found.update({"algorithm": _text(start.get("algorithm")), "env": _text(start.get("env")),
                      "pop_size": start.get("pop_size"),
                      "started": _iso_seconds(start.get("time")),
                      "active_seconds": _active_seconds(events)})
    if end is not None:
        found.update({"status": _text(end.get("status")),
                      "best_fitness": end.get("best_fitness")})
    return found


_told: dict[Path, tuple[list[JsonObject], _Told]] = {}


def _told_by_events(run: RunFolder) -> _Told:
    """:func:`_from_events` of the run's events, worked out again only when they change
    (the reader returns the same list until the file does)."""
    events = read_events(run.path)
    memo = _told.get(run.path)
    if memo is not None and memo[0] is events:
        return memo[1]
    found = _from_events(events)
    _told[run.path] = (events, found)
    return found


def _section_name(manifest: JsonObject, section: str) -> str | None:
    part = manifest.get(section)
    return _text(part.get("name")) if isinstance(part, dict) else None


def _status(told: str | None, updated: float | None, started: float | None,
            generations: int, elite: bool, now: float) -> str:
    """The recorded end, else "running" while the files change, else what is left."""
    if told:
        return told
    live = LIVE_SECONDS
    if updated is not None and started is not None and generations > 0:
        live = max(live, 3 * (updated - started) / generations)
    if updated is not None and now - updated < live:
        return "running"
    return "finished" if elite else "stopped"


def summarize(run: RunFolder, now: float | None = None) -> JsonObject:
    """The runs-list row of ``run``."""
    now = time.time() if now is None else now
    metrics = read_metrics(run.path)
    told = _told_by_events(run)
    _, manifest = read_manifest(run.path)
    section = manifest.get("training")
    training: JsonObject = section if isinstance(section, dict) else {}
    best_column = [v for v in metrics.column("eval/best_fitness") if v is not None]
    updated = max((t for t in (_mtime(run.path / name) for name in RUN_FILES) if t is not None),
                  default=None)
    started = told.get("started") or _mtime(run.path / MANIFEST_FILE)
    generations = int(metrics.last("train/generation") or len(metrics.rows))
    wall = told.get("active_seconds")
    if wall is None and started is not None and updated is not None:
        wall = updated - started
    best = max(best_column) if best_column else told.get("best_fitness")
    return {
        "id": run.id, "name": run.name, "folder": str(run.path),
        "algorithm": told.get("algorithm") or _section_name(manifest, "algorithm"),
        "env": told.get("env") or _section_name(manifest, "environment"),
        "pop_size": told.get("pop_size") or training.get("pop_size"),
        "status": _status(told.get("status"), updated, started, generations,
                          (run.path / ELITE_FILE).is_file(), now),
        "best_fitness": best,
        "steps": metrics.last("train/global_step"),
        "generations": generations,
        "started": started, "updated": updated,
        "wall_seconds": wall,
        "has_events": (run.path / EVENTS_FILE).is_file(),
    }
