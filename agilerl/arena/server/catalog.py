"""Uploaded environments and datasets: their records and where their files live.

Records are kept in ``<data-dir>/catalog.sqlite3`` (WAL, one connection behind a lock)
and are always looked up by owner: no query here can return another user's row. Files:

* ``environments/<user id>/<name>/<version>/``: ``source/`` (the unpacked upload),
  ``venv/`` (its virtual environment) and ``scratch/`` (HOME and TMPDIR of its checks);
* ``datasets/<user id>/<name>/data.csv``.

Names and versions match :data:`NAME` (no ``/``, never ``.`` or ``..``), so they are
safe as folder names.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from agilerl.arena.server.errors import ApiError
from agilerl.arena.server.store import now_iso

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: ``version`` values meaning "the newest version" (spec §9.1).
LATEST = (None, "", "None", "null", "latest")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS custom_environments (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    description TEXT,
    multi_agent INTEGER NOT NULL DEFAULT 0,
    language_based INTEGER NOT NULL DEFAULT 0,
    entrypoint TEXT,
    entrypoints TEXT NOT NULL DEFAULT '[]',
    env_config TEXT NOT NULL DEFAULT '{}',
    requirements TEXT NOT NULL DEFAULT '[]',
    state TEXT NOT NULL,
    validated INTEGER NOT NULL DEFAULT 0,
    profiled INTEGER NOT NULL DEFAULT 0,
    profile TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (user_id, name, version)
);
CREATE TABLE IF NOT EXISTS datasets (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    description TEXT,
    column_mapping TEXT NOT NULL,
    columns TEXT NOT NULL,
    rows INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
"""
_JSON_COLUMNS = ("entrypoints", "env_config", "requirements", "profile", "column_mapping",
                 "columns")
#: one database row by column name (JSON columns parsed); each column has its own type,
#: which the code reading it knows from the schema above.
Row = dict[str, Any]


#: folders of the data folder holding uploads, one sub-folder per user id.
ENV_FOLDER, DATASET_FOLDER = "environments", "datasets"


def user_roots(data_dir: Path, user_id: int) -> list[Path]:
    """The folders holding ``user_id``'s uploaded environments and datasets."""
    return [Path(data_dir) / folder / str(int(user_id))
            for folder in (ENV_FOLDER, DATASET_FOLDER)]


def check_name(value: object, field: str) -> str:
    """A valid environment/dataset/version name, or 422 naming ``field``."""
    text = value.strip() if isinstance(value, str) else ""
    if not NAME.match(text):
        raise ApiError(422, "INVALID_REQUEST",
                       f"{field} must start with a letter or digit and use only letters,"
                       " digits, '.', '_' or '-' (at most 128)",
                       errors=[f"{field}: invalid value {value!r}"])
    return text


def _decode(row: sqlite3.Row | None) -> Row | None:
    if row is None:
        return None
    out = dict(row)
    for key in _JSON_COLUMNS:
        if key in out and isinstance(out[key], str):
            out[key] = json.loads(out[key])
    return out


class Catalog:
    """Per-user records of uploaded environments and datasets."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.env_root = self.data_dir / ENV_FOLDER
        self.dataset_root = self.data_dir / DATASET_FOLDER
        for folder in (self.env_root, self.dataset_root):
            folder.mkdir(mode=0o700, exist_ok=True)
        path = self.data_dir / "catalog.sqlite3"
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        with self._lock:
            self._db.executescript(_SCHEMA)
        path.chmod(0o600)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _one(self, sql: str, args: tuple[object, ...]) -> Row | None:
        with self._lock:
            return _decode(self._db.execute(sql, args).fetchone())

    def _all(self, sql: str, args: tuple[object, ...]) -> list[Row]:
        with self._lock:
            return [r for r in (_decode(x) for x in self._db.execute(sql, args).fetchall())
                    if r is not None]

    def _write(self, sql: str, args: tuple[object, ...]) -> int:
        with self._lock:
            return int(self._db.execute(sql, args).rowcount)

    # ---- environments ------------------------------------------------------------------

    def env_dir(self, user_id: int, name: str, version: str) -> Path:
        return self.env_root / str(int(user_id)) / name / version

    def environments(self, user_id: int, name: str | None = None) -> list[Row]:
        """The user's environment versions, oldest first (optionally ``name`` exactly)."""
        if name is None:
            return self._all("SELECT * FROM custom_environments WHERE user_id = ?"
                             " ORDER BY name, id", (user_id,))
        return self._all("SELECT * FROM custom_environments WHERE user_id = ? AND name = ?"
                         " ORDER BY id", (user_id, name))

    def environment(self, user_id: int, name: str, version: str | None) -> Row | None:
        """One version; the newest when ``version`` is one of :data:`LATEST`."""
        if version in LATEST:
            return self._one("SELECT * FROM custom_environments WHERE user_id = ? AND name = ?"
                             " ORDER BY id DESC LIMIT 1", (user_id, name))
        return self._one("SELECT * FROM custom_environments WHERE user_id = ? AND name = ?"
                         " AND version = ?", (user_id, name, version))

    def add_environment(self, user_id: int, fields: Row) -> Row:
        """Record a new version (state ``uploaded``); 409 when it exists already."""
        stamp = now_iso()
        cols = {**fields, "user_id": user_id, "state": "uploaded", "created_at": stamp,
                "updated_at": stamp}
        for key in _JSON_COLUMNS:
            if key in cols and not isinstance(cols[key], str | None):
                cols[key] = json.dumps(cols[key])
        names, marks = ", ".join(cols), ", ".join("?" * len(cols))
        try:
            self._write(f"INSERT INTO custom_environments ({names}) VALUES ({marks})",
                        tuple(cols.values()))
        except sqlite3.IntegrityError:
            raise ApiError(409, "ENVIRONMENT_EXISTS",
                           f"Environment '{fields['name']}' version '{fields['version']}'"
                           " already exists; choose another version or delete it first"
                           ) from None
        row = self.environment(user_id, fields["name"], fields["version"])
        assert row is not None
        return row

    def update_environment(self, env_id: int, **fields: object) -> None:
        for key in _JSON_COLUMNS:
            if key in fields and not isinstance(fields[key], str | None):
                fields[key] = json.dumps(fields[key])
        fields["updated_at"] = now_iso()
        # column names come from this package's code, never from a request
        sets = ", ".join(f"{k} = ?" for k in fields)
        self._write(f"UPDATE custom_environments SET {sets} WHERE id = ?",
                    (*fields.values(), env_id))

    def delete_environment(self, env_id: int) -> None:
        self._write("DELETE FROM custom_environments WHERE id = ?", (env_id,))

    # ---- datasets ------------------------------------------------------------------------

    def dataset_file(self, user_id: int, name: str) -> Path:
        return self.dataset_root / str(int(user_id)) / name / "data.csv"

    def datasets(self, user_id: int, name: str | None = None) -> list[Row]:
        if name is None:
            return self._all("SELECT * FROM datasets WHERE user_id = ? ORDER BY id", (user_id,))
        return self._all("SELECT * FROM datasets WHERE user_id = ? AND name = ?",
                         (user_id, name))

    def dataset(self, user_id: int, name: str) -> Row | None:
        return self._one("SELECT * FROM datasets WHERE user_id = ? AND name = ?",
                         (user_id, name))

    def add_dataset(self, user_id: int, fields: Row) -> Row:
        cols = {**fields, "user_id": user_id, "created_at": now_iso()}
        for key in ("column_mapping", "columns"):
            cols[key] = json.dumps(cols[key])
        names, marks = ", ".join(cols), ", ".join("?" * len(cols))
        try:
            self._write(f"INSERT INTO datasets ({names}) VALUES ({marks})", tuple(cols.values()))
        except sqlite3.IntegrityError:
            raise ApiError(409, "DATASET_EXISTS",
                           f"Dataset '{fields['name']}' already exists; delete it first"
                           ) from None
        row = self.dataset(user_id, fields["name"])
        assert row is not None
        return row

    def delete_dataset(self, dataset_id: int) -> None:
        self._write("DELETE FROM datasets WHERE id = ?", (dataset_id,))
