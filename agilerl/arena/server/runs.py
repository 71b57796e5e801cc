"""One experiment's folder: manifest, NDJSON log, metrics CSV and checkpoints.

``<data-dir>/experiments/<id>/`` holds ``manifest.json`` (the manifest of the current
attempt), ``logs.ndjson`` (one ``{"seq","ts","stream","message"}`` object per output
line, appended across attempts), ``checkpoints/`` (what the trainer writes; a checkpoint
is a folder with an ``index.json`` written last) and ``run/`` (the trainer's run folder,
with its ``metrics.csv``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agilerl.arena.server.store import now_iso

_DIGITS = re.compile(r"(\d+)(?!.*\d)")
READ_CHUNK = 1 << 20
MAX_LINE = 64 * 1024
_CSV_STEP_KEYS = ("train/global_step", "global_step", "step", "steps")
_STEP_KEYS = ("steps", "step", "global_step", "total_steps")
_EVAL_KEYS = ("evaluation_score", "best_fitness", "fitness", "eval_score")
_TRAIN_KEYS = ("training_score", "train_score", "score")


@dataclass
class Checkpoint:
    name: str
    path: Path
    #: env steps of the whole population (the trainer's ``global_step``).
    total_steps: int
    #: ``total_steps`` per agent: the unit of ``training.max_steps``.
    steps: int
    evaluation_score: float | None
    training_score: float | None
    size_mb: float
    created_at: str

    def row(self) -> dict[str, Any]:
        return {"name": self.name, "steps": self.steps, "total_steps": self.total_steps,
                "size_mb": round(self.size_mb, 3), "training_score": self.training_score,
                "evaluation_score": self.evaluation_score, "created_at": self.created_at}


def _number(data: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
            return float(max(value))
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


class RunDir:
    """Paths and readers for one experiment folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.manifest = root / "manifest.json"
        self.logs = root / "logs.ndjson"
        self.checkpoints = root / "checkpoints"
        #: the trainer's own run folder (``--run-dir``): resolved manifest, metrics.csv.
        self.run = root / "run"
        #: the job's ``TMPDIR``.
        self.tmp = root / "tmp"

    def create(self, manifest: dict[str, Any]) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.checkpoints.mkdir(exist_ok=True)
        self.write_manifest(manifest)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n")
        tmp.replace(self.manifest)

    def read_manifest(self) -> dict[str, Any]:
        data = json.loads(self.manifest.read_text())
        return data if isinstance(data, dict) else {}

    def agents(self) -> int:
        """The population size the manifest asks for (1 when it cannot be read).

        The trainer counts steps for the whole population (``train/global_step``) while
        ``training.max_steps`` is per agent; steps shown to users are divided by this.
        """
        try:
            training = self.read_manifest().get("training") or {}
        except (OSError, ValueError):
            return 1
        size = training.get("pop_size", training.get("population_size", 1))
        return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 1

    # ---- checkpoints ------------------------------------------------------------------

    def list_checkpoints(self) -> list[Checkpoint]:
        """Complete checkpoints (folders whose ``index.json`` exists), oldest first."""
        found = []
        if self.checkpoints.is_dir():
            agents = self.agents()
            for index in sorted(self.checkpoints.glob("**/index.json")):
                found.append(self._checkpoint(index, agents))
        found.sort(key=lambda c: (c.total_steps, c.created_at))
        return found

    def _checkpoint(self, index: Path, agents: int) -> Checkpoint:
        folder = index.parent
        try:
            data = json.loads(index.read_text())
        except (OSError, ValueError):
            data = {}
        data = data if isinstance(data, dict) else {}
        summary = data.get("summary")
        if isinstance(summary, dict):  # the trainer's own summary wins over top-level keys
            data = {**data, **summary}
        steps = _number(data, _STEP_KEYS)
        if steps is None:
            match = _DIGITS.search(folder.name)
            steps = float(match.group(1)) if match else 0.0
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        stamp = datetime.fromtimestamp(index.stat().st_mtime, timezone.utc)
        return Checkpoint(
            name=folder.relative_to(self.checkpoints).as_posix(),
            path=folder,
            total_steps=int(steps),
            steps=int(steps) // agents,
            evaluation_score=_number(data, _EVAL_KEYS),
            training_score=_number(data, _TRAIN_KEYS),
            size_mb=size / 1e6,
            created_at=stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        )

    def latest_checkpoint(self) -> Checkpoint | None:
        found = self.list_checkpoints()
        return found[-1] if found else None

    def best_checkpoint(self) -> Checkpoint | None:
        found = self.list_checkpoints()
        scored = [c for c in found if c.evaluation_score is not None]
        if scored:
            return max(scored, key=lambda c: (c.evaluation_score, c.steps))
        return found[-1] if found else None

    def checkpoint_archive(self, checkpoint: Checkpoint) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(checkpoint.path, arcname=checkpoint.path.name)
        return buf.getvalue()

    # ---- metrics ----------------------------------------------------------------------

    def metrics_file(self) -> Path | None:
        """The trainer's metrics CSV: ``run/metrics.csv``, else the newest CSV under ``run/``."""
        for known in (self.run / "metrics.csv", self.root / "metrics.csv"):
            if known.is_file():
                return known
        found = list(self.run.rglob("*.csv")) if self.run.is_dir() else []
        return max(found, key=lambda p: p.stat().st_mtime) if found else None

    def metric_names(self) -> list[str]:
        path = self.metrics_file()
        if path is None:
            return []
        with path.open(newline="") as fh:
            header = next(csv.reader(fh), [])
        return [h for h in header if h]

    def metrics_csv(self, metrics: list[str], rows: int) -> str:
        """At most ``rows`` data rows, restricted to ``metrics`` (all when empty)."""
        path = self.metrics_file()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if path is None:
            return ""
        with path.open(newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            keep = [header.index(m) for m in metrics] if metrics else list(range(len(header)))
            writer.writerow([header[i] for i in keep])
            for n, row in enumerate(reader):
                if n >= rows:
                    break
                writer.writerow([row[i] if i < len(row) else "" for i in keep])
        return out.getvalue()

    def trim_metrics(self, last_total: int) -> int:
        """Drop the metrics rows logged after population step ``last_total``.

        A run resumed from a checkpoint appends to the same CSV; the rows its previous
        attempt wrote after that checkpoint would otherwise appear twice. Rewritten
        atomically; returns how many rows were dropped.
        """
        path = self.metrics_file()
        if path is None:
            return 0
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        if not rows:
            return 0
        header, body = rows[0], rows[1:]
        column = next((header.index(k) for k in _CSV_STEP_KEYS if k in header), None)
        if column is None:
            return 0
        kept = [row for row in body if _step_at_most(row, column, last_total)]
        if len(kept) == len(body):
            return 0
        tmp = path.with_name(f".{path.name}.trim")
        with tmp.open("w", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows([header, *kept])
        tmp.replace(path)
        return len(body) - len(kept)

    def last_metric_step(self) -> int | None:
        """The population step count on the metrics CSV's last row (steps only grow).

        Reads the header and the file's tail only, so polling a long run stays cheap.
        """
        path = self.metrics_file()
        if path is None:
            return None
        with path.open("rb") as fh:
            header = next(csv.reader([fh.readline().decode("utf-8", "replace")]), [])
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 65536))
            tail = fh.read().decode("utf-8", "replace").splitlines()
        column = next((header.index(k) for k in _CSV_STEP_KEYS if k in header), None)
        if column is None:
            return None
        for line in reversed(tail[1:] if len(tail) > 1 else tail):
            row = next(csv.reader([line]), [])
            if len(row) == len(header):
                with contextlib.suppress(ValueError):
                    return int(float(row[column]))
        return None

    # ---- logs -------------------------------------------------------------------------

    def read_logs(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Complete log lines from byte ``offset`` (at most ~1 MiB); returns them and the
        next offset, so a long log is streamed in pieces rather than loaded whole."""
        if not self.logs.exists():
            return [], offset
        with self.logs.open("rb") as fh:
            fh.seek(offset)
            chunk = fh.read(READ_CHUNK)
        end = chunk.rfind(b"\n")
        if end < 0:
            return [], offset
        entries = []
        for line in chunk[: end + 1].splitlines():
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue
        return entries, offset + end + 1


def _step_at_most(row: list[str], column: int, limit: int) -> bool:
    try:
        return float(row[column]) <= limit
    except (IndexError, ValueError):
        return False  # a torn last line of a killed run


class LogWriter:
    """Appends numbered NDJSON lines; safe for the stdout and stderr reader threads.

    Messages longer than ``MAX_LINE`` characters are cut (and say so), which keeps every
    stored line well under ``READ_CHUNK``.
    """

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._seq = _last_seq(path)
        self._fh = path.open("a", encoding="utf-8")

    def write(self, stream: str, message: str) -> int:
        with self._lock:
            if len(message) > MAX_LINE:
                message = message[:MAX_LINE] + f" [... {len(message) - MAX_LINE} chars cut]"
            self._seq += 1
            entry = {"seq": self._seq, "ts": now_iso(), "stream": stream, "message": message}
            self._fh.write(json.dumps(entry) + "\n")
            self._fh.flush()
            return self._seq

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def _last_seq(path: Path) -> int:
    if not path.exists():
        return 0
    last = 0
    for line in _tail_lines(path):
        try:
            last = int(json.loads(line)["seq"])
            break
        except (ValueError, KeyError, TypeError):
            continue
    return last


def _tail_lines(path: Path, size: int = 65536) -> Iterator[bytes]:
    with path.open("rb") as fh:
        fh.seek(0, 2)
        end = fh.tell()
        fh.seek(max(0, end - size))
        data = fh.read()
    yield from reversed([ln for ln in data.splitlines() if ln.strip()])
