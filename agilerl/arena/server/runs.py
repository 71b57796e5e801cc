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
import os
import re
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agilerl.arena.server import nofollow
from agilerl.arena.server.store import now_iso

if TYPE_CHECKING:
    from collections.abc import Mapping

    from agilerl.core.value_types import JsonObject, JsonValue

_DIGITS = re.compile(r"(\d+)(?!.*\d)")
READ_CHUNK = 1 << 20
MAX_LINE = 64 * 1024
#: how deep below ``checkpoints/`` a checkpoint folder is looked for.
CHECKPOINT_DEPTH = 6
#: a metrics CSV larger than this is not rewritten on resume (it would be read whole).
MAX_TRIM_BYTES = 256 << 20
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
    #: the generation the checkpoint ends (counted from 1), when the trainer recorded it.
    generation: int | None = None
    #: the population slot holding the best member, when the trainer recorded it.
    elite_member: int | None = None

    def row(self) -> JsonObject:
        return {"name": self.name, "steps": self.steps, "total_steps": self.total_steps,
                "size_mb": round(self.size_mb, 3), "training_score": self.training_score,
                "evaluation_score": self.evaluation_score, "created_at": self.created_at,
                "generation": self.generation, "elite_member": self.elite_member}


def untrusted_json(text: bytes | str) -> JsonValue:
    """JSON a job could have written, or None when it is not JSON (or nests too deep to
    parse: ``json`` raises RecursionError for that)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _number(data: Mapping[str, JsonValue], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
            return float(max(cast("list[float]", value)))
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def whole_count(value: object) -> int | None:
    """A whole number >= 0 the job wrote, else None (the job's files are untrusted)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


class RunDir:
    """Paths and readers for one experiment folder.

    Everything below :attr:`root` is the job's to write, so every read and write here
    goes through :mod:`.nofollow`: a link, FIFO or device a job planted is refused, never
    followed, and a file the server cannot parse reads as "nothing there".
    """

    def __init__(self, root: Path, agents: int = 1) -> None:
        self.root = root
        self.manifest = root / "manifest.json"
        self.logs = root / "logs.ndjson"
        self.checkpoints = root / "checkpoints"
        #: the trainer's own run folder (``--run-dir``): resolved manifest, metrics.csv.
        self.run = root / "run"
        #: the job's ``TMPDIR``.
        self.tmp = root / "tmp"
        #: the population size of the server's copy of the manifest: the trainer counts
        #: steps for the whole population (``train/global_step``) while
        #: ``training.max_steps`` is per agent, so steps shown to users are divided by this.
        self.agents = agents if agents > 0 else 1

    def create(self, manifest: Mapping[str, JsonValue]) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.checkpoints.mkdir(exist_ok=True)
        self.write_manifest(manifest)

    def write_manifest(self, manifest: Mapping[str, JsonValue]) -> None:
        """(Re)write the job's copy of the manifest (the server's own is in the database)."""
        text = json.dumps(manifest, indent=2, allow_nan=False) + "\n"
        nofollow.write_atomic(self.root, "manifest.json", text.encode())

    def read_manifest(self) -> JsonObject:
        """The job's copy of the manifest: only for importing experiments recorded before
        the database held its own copy (:meth:`.Scheduler.manifest_of`)."""
        data = untrusted_json(nofollow.read_bytes(self.root, "manifest.json"))
        return data if isinstance(data, dict) else {}

    # ---- checkpoints ------------------------------------------------------------------

    def list_checkpoints(self) -> list[Checkpoint]:
        """Complete checkpoints (real folders whose ``index.json`` is a regular file),
        oldest first; linked folders and files are not looked at."""
        entries = nofollow.walk(self.root, "checkpoints", depth=CHECKPOINT_DEPTH)
        files = [e for e in entries if e.kind == "file"]
        found = []
        for index in files:
            folder, _, name = index.rel.rpartition("/")
            if name == "index.json" and folder:
                found.append(self._checkpoint(folder, index, files))
        found.sort(key=lambda c: (c.total_steps, c.created_at))
        return found

    def _checkpoint(self, folder: str, index: nofollow.Entry,
                    files: list[nofollow.Entry]) -> Checkpoint:
        try:
            data = untrusted_json(nofollow.read_bytes(self.root, f"checkpoints/{index.rel}"))
        except OSError:
            data = {}
        data = data if isinstance(data, dict) else {}
        summary = data.get("summary")
        if isinstance(summary, dict):  # the trainer's own summary wins over top-level keys
            data = {**data, **summary}
        steps = _number(data, _STEP_KEYS)
        if steps is None:
            match = _DIGITS.search(folder.rpartition("/")[2])
            steps = float(match.group(1)) if match else 0.0
        size = sum(e.size for e in files if e.rel.startswith(f"{folder}/"))
        stamp = datetime.fromtimestamp(index.mtime, timezone.utc)
        return Checkpoint(
            name=folder,
            path=self.checkpoints / folder,
            total_steps=int(steps),
            steps=int(steps) // self.agents,
            evaluation_score=_number(data, _EVAL_KEYS),
            training_score=_number(data, _TRAIN_KEYS),
            size_mb=size / 1e6,
            created_at=stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            generation=whole_count(data.get("generation")),
            elite_member=whole_count(data.get("elite_member")),
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
        """The checkpoint folder as a ``.tar.gz``: its real folders and regular files only
        (links and special files a job left there are skipped).

        :raises OSError: a file changed while it was packed.
        """
        base = f"checkpoints/{checkpoint.name}"
        top = checkpoint.name.rpartition("/")[2]
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.addfile(_tar_dir(top))
            for entry in nofollow.walk(self.root, base, depth=CHECKPOINT_DEPTH):
                if entry.kind == "dir":
                    tar.addfile(_tar_dir(f"{top}/{entry.rel}"))
                elif entry.kind == "file":
                    _tar_file(tar, self.root, f"{base}/{entry.rel}", f"{top}/{entry.rel}")
        return buf.getvalue()

    # ---- metrics ----------------------------------------------------------------------

    def metrics_file(self) -> str | None:
        """The trainer's metrics CSV, relative to :attr:`root`: ``run/metrics.csv``, else
        the newest CSV under ``run/``; only regular files reached without links count."""
        for known in ("run/metrics.csv", "metrics.csv"):
            found_file = nofollow.entry(self.root, known)
            if found_file is not None and found_file.kind == "file":
                return known
        found = [e for e in nofollow.walk(self.root, "run", depth=4, limit=10_000)
                 if e.kind == "file" and e.rel.endswith(".csv")]
        return f"run/{max(found, key=lambda e: e.mtime).rel}" if found else None

    def metric_names(self) -> list[str]:
        """The metrics CSV's column names ([] when there is none or it cannot be parsed)."""
        path = self.metrics_file()
        try:
            header = self._header(path) if path is not None else []
        except (OSError, ValueError, csv.Error):
            return []
        return [h for h in header if h]

    def _header(self, path: str) -> list[str]:
        with nofollow.open_file(self.root, path) as fh:
            line = fh.readline(MAX_LINE)
        if len(line) >= MAX_LINE and not line.endswith(b"\n"):
            raise ValueError("header line too long")
        return _csv_row(line)

    def metrics_csv(self, metrics: list[str], rows: int) -> str:
        """At most ``rows`` data rows, restricted to ``metrics`` (all when empty).

        :raises MetricsUnreadable: the file is not a CSV this server can read.
        """
        path = self.metrics_file()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if path is None:
            return ""
        try:
            with nofollow.open_file(self.root, path) as raw:
                fh = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
                reader = csv.reader(fh)
                header = next(reader, [])
                keep = [header.index(m) for m in metrics] if metrics else list(range(len(header)))
                writer.writerow([header[i] for i in keep])
                for n, row in enumerate(reader):
                    if n >= rows:
                        break
                    writer.writerow([row[i] if i < len(row) else "" for i in keep])
        except (OSError, ValueError, csv.Error):
            raise MetricsUnreadable(path) from None
        return out.getvalue()

    def trim_metrics(self, last_total: int) -> int:
        """Drop the metrics rows logged after population step ``last_total``.

        A run resumed from a checkpoint appends to the same CSV; the rows its previous
        attempt wrote after that checkpoint would otherwise appear twice. Rewritten
        atomically, bytes kept as they were; returns how many rows were dropped. A file
        that cannot be read as a CSV is left alone (0): the trainer's own problem.
        """
        path = self.metrics_file()
        if path is None:
            return 0
        try:
            with nofollow.open_file(self.root, path) as raw:
                if os.fstat(raw.fileno()).st_size > MAX_TRIM_BYTES:
                    return 0
                fh = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape",
                                      newline="")
                rows = list(csv.reader(fh))
        except (OSError, ValueError, csv.Error):
            return 0
        if not rows:
            return 0
        header, body = rows[0], rows[1:]
        column = next((header.index(k) for k in _CSV_STEP_KEYS if k in header), None)
        if column is None:
            return 0
        kept = [row for row in body if _step_at_most(row, column, last_total)]
        if len(kept) == len(body):
            return 0
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([header, *kept])
        nofollow.write_atomic(self.root, path, out.getvalue().encode("utf-8", "surrogateescape"))
        return len(body) - len(kept)

    def last_metric_step(self) -> int | None:
        """The population step count on the metrics CSV's last row (steps only grow);
        None when there is none or the file cannot be parsed.

        Reads the header and the file's tail only, so polling a long run stays cheap.
        """
        try:
            return self._last_metric_step()
        except (OSError, ValueError, csv.Error):
            return None

    def _last_metric_step(self) -> int | None:
        path = self.metrics_file()
        if path is None:
            return None
        header = self._header(path)
        with nofollow.open_file(self.root, path) as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 65536))
            tail = fh.read(65536).decode("utf-8", "replace").splitlines()
        column = next((header.index(k) for k in _CSV_STEP_KEYS if k in header), None)
        if column is None:
            return None
        for line in reversed(tail[1:] if len(tail) > 1 else tail):
            row = _csv_row(line.encode())
            if len(row) == len(header):
                with contextlib.suppress(ValueError, OverflowError):
                    return int(float(row[column]))
        return None

    # ---- logs -------------------------------------------------------------------------

    def log_size(self) -> int:
        """Bytes in ``logs.ndjson`` (0 when missing or not a regular file)."""
        found = nofollow.entry(self.root, "logs.ndjson")
        return found.size if found is not None and found.kind == "file" else 0

    def read_logs(self, offset: int = 0) -> tuple[list[JsonObject], int]:
        """Complete log lines from byte ``offset`` (at most ~1 MiB); returns them and the
        next offset, so a long log is streamed in pieces rather than loaded whole."""
        try:
            with nofollow.open_file(self.root, "logs.ndjson") as fh:
                fh.seek(offset)
                chunk = fh.read(READ_CHUNK)
        except OSError:
            return [], offset
        end = chunk.rfind(b"\n")
        if end < 0:
            return [], offset
        entries: list[JsonObject] = []
        for line in chunk[: end + 1].splitlines():
            entry = untrusted_json(line)
            if isinstance(entry, dict):
                entries.append(entry)
        return entries, offset + end + 1


class MetricsUnreadable(ValueError):
    """The metrics file is not a CSV the server can read (its bytes are never quoted)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is not a readable CSV file")
        self.path = path


def _csv_row(line: bytes) -> list[str]:
    return next(csv.reader([line.decode("utf-8", "replace").rstrip("\r\n")]), [])


def _tar_dir(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info


def _tar_file(tar: tarfile.TarFile, root: Path, rel: str, arcname: str) -> None:
    try:
        fh = nofollow.open_file(root, rel)
    except nofollow.Refused:  # replaced by a link since it was listed
        return
    with fh:
        stat = os.fstat(fh.fileno())
        info = tarfile.TarInfo(arcname)
        info.size, info.mode, info.mtime = stat.st_size, 0o644, int(stat.st_mtime)
        tar.addfile(info, fh)


def _step_at_most(row: list[str], column: int, limit: int) -> bool:
    try:
        return float(row[column]) <= limit
    except (IndexError, ValueError):
        return False  # a torn last line of a killed run


class LogWriter:
    """Appends numbered NDJSON lines; safe for the stdout and stderr reader threads.

    Messages longer than ``MAX_LINE`` characters are cut (and say so), which keeps every
    stored line well under ``READ_CHUNK``. The file is opened without following links
    (:mod:`.nofollow`): a job that replaced it with one makes the launch fail instead.
    """

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._seq = _last_seq(path)
        self._fh = nofollow.open_append(path.parent, path.name)

    def write(self, stream: str, message: str) -> int:
        with self._lock:
            if len(message) > MAX_LINE:
                message = message[:MAX_LINE] + f" [... {len(message) - MAX_LINE} chars cut]"
            self._seq += 1
            entry = {"seq": self._seq, "ts": now_iso(), "stream": stream, "message": message}
            self._fh.write((json.dumps(entry) + "\n").encode())
            self._fh.flush()
            return self._seq

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def _last_seq(path: Path) -> int:
    """The ``seq`` of the log's last line that has one :class:`LogWriter` could have
    written (a whole number >= 0), else 0. The job may have rewritten its log: lines that
    are not JSON objects, or whose ``seq`` is anything else (a float, ``Infinity``,
    ``NaN``, a string), are passed over."""
    for line in _tail_lines(path):
        entry = untrusted_json(line)
        seq = whole_count(entry.get("seq")) if isinstance(entry, dict) else None
        if seq is not None:
            return seq
    return 0


def _tail_lines(path: Path, size: int = 65536) -> Iterator[bytes]:
    try:
        with nofollow.open_file(path.parent, path.name) as fh:
            fh.seek(0, 2)
            end = fh.tell()
            fh.seek(max(0, end - size))
            data = fh.read(size)
    except FileNotFoundError:
        return
    yield from reversed([ln for ln in data.splitlines() if ln.strip()])
