"""SQLite (WAL) job store: users, tokens, projects, experiments and their transitions.

One connection guarded by a lock: every write is a short ``BEGIN IMMEDIATE`` transaction,
so each state change and its timestamped ``transitions`` row commit together. Uniqueness
that matters under concurrency (experiment names, idempotency keys) is enforced by
indexes, not by read-then-write checks alone.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agilerl.arena.server import states
from agilerl.arena.server.errors import ApiError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    token_hash TEXT NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS refresh_tokens (
    jti TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    expires_at REAL NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS device_codes (
    device_hash TEXT PRIMARY KEY,
    user_code TEXT NOT NULL UNIQUE,
    client_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    user_id INTEGER REFERENCES users(id),
    status TEXT NOT NULL DEFAULT 'pending',
    expires_at REAL NOT NULL,
    interval_s INTEGER NOT NULL,
    last_poll REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS projects (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    name TEXT NOT NULL,
    description TEXT,
    llm_based INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (user_id, name)
);
CREATE TABLE IF NOT EXISTS experiments (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    project_id INTEGER NOT NULL REFERENCES projects(id),
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    algorithm TEXT,
    environment TEXT,
    resource_id TEXT NOT NULL,
    num_nodes INTEGER NOT NULL,
    max_steps INTEGER NOT NULL,
    pop_size INTEGER NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    restarts INTEGER NOT NULL DEFAULT 0,
    steps INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    pid INTEGER,
    idempotency_key TEXT,
    created_at TEXT NOT NULL,
    queued_at TEXT,
    started_at TEXT,
    finished_at TEXT,
    updated_at TEXT NOT NULL,
    manifest TEXT,
    custom_env TEXT,
    manifest_file TEXT,
    UNIQUE (project_id, name)
);
CREATE UNIQUE INDEX IF NOT EXISTS experiments_idempotency
    ON experiments (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS experiments_state ON experiments (state, queued_at, id);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    from_state TEXT,
    to_state TEXT NOT NULL,
    reason TEXT,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS transitions_experiment ON transitions (experiment_id, id);
"""

#: experiments columns added after databases were first created: ``(name, type)``, added
#: to an older database when it is opened. ``manifest`` is the server's copy of the run
#: manifest (JSON) and ``custom_env`` the uploaded environment a run uses (JSON, ``null``
#: for none): what a (re)launch is built from, kept here because the job can rewrite
#: anything in its experiment folder. Both are SQL NULL only in rows older than them.
#: ``manifest_file`` is the name of the file the user submitted, cited in the job's log.
_ADDED_COLUMNS = (("manifest", "TEXT"), ("custom_env", "TEXT"), ("manifest_file", "TEXT"))
#: one database row by column name; each column has its own type, which the code reading it
#: knows from the schema above.
Row = dict[str, Any]
_ACTIVE = tuple(sorted(states.ACTIVE))
_ACTIVE_MARKS = ",".join("?" * len(_ACTIVE))


def _assignments(fields: Row) -> str:
    # Column names come from this package's code, never from a request.
    return ", ".join(f"{k} = ?" for k in fields)


def now_iso() -> str:
    """UTC timestamp with milliseconds, e.g. ``2026-01-31T12:00:00.123Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class CorruptDatabase(Exception):
    """The database file exists but SQLite cannot use it (damaged, or replaced by another
    file); the message names it and what the operator can do. The file is left untouched."""

    def __init__(self, path: Path, error: sqlite3.DatabaseError) -> None:
        super().__init__(
            f"the server database {path} is damaged or is not a database ({error}); restore "
            "it from a backup, or move it aside to start with an empty one (users, tokens "
            "and experiment records are then lost; experiment folders stay on disk)")
        self.path = path


class Store:
    """Thread-safe access to the server database."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode survives any process crash; only an OS crash can lose the
            # last commit.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=5000")
            with self._lock:
                self._db.executescript(_SCHEMA)
                have = {r["name"] for r in self._db.execute("PRAGMA table_info(experiments)")}
                for name, kind in _ADDED_COLUMNS:
                    if name not in have:
                        self._db.execute(f"ALTER TABLE experiments ADD COLUMN {name} {kind}")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise CorruptDatabase(self.path, exc) from None
        self.path.chmod(0o600)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One committed-or-rolled-back write transaction."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _one(self, sql: str, args: tuple[object, ...] = ()) -> Row | None:
        with self._lock:
            row = self._db.execute(sql, args).fetchone()
        return dict(row) if row is not None else None

    def _all(self, sql: str, args: tuple[object, ...] = ()) -> list[Row]:
        with self._lock:
            return [dict(r) for r in self._db.execute(sql, args).fetchall()]

    # ---- users and credentials -------------------------------------------------------

    def ensure_user(self, name: str, *, admin: bool = False) -> Row:
        with self.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO users (name, is_admin, created_at) VALUES (?, ?, ?)",
                (name, int(admin), now_iso()),
            )
            if admin:
                db.execute("UPDATE users SET is_admin = 1 WHERE name = ?", (name,))
        user = self._one("SELECT * FROM users WHERE name = ?", (name,))
        assert user is not None
        return user

    def user(self, user_id: int) -> Row | None:
        return self._one("SELECT * FROM users WHERE id = ?", (user_id,))

    def user_by_name(self, name: str) -> Row | None:
        return self._one("SELECT * FROM users WHERE name = ?", (name,))

    def add_token(self, token_id: str, user_id: int, token_hash: str) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT INTO tokens (token_id, user_id, token_hash, created_at) VALUES (?,?,?,?)",
                (token_id, user_id, token_hash, now_iso()),
            )

    def tokens(self, user_name: str | None = None, *, revoked: bool = False) -> list[Row]:
        """Personal access tokens (never their hashes), oldest first; ``revoked`` includes
        revoked ones."""
        sql = ("SELECT t.token_id, u.name AS user, t.created_at, t.revoked FROM tokens t"
               " JOIN users u ON u.id = t.user_id WHERE (? IS NULL OR u.name = ?)")
        if not revoked:
            sql += " AND t.revoked = 0"
        return self._all(sql + " ORDER BY t.created_at, t.token_id", (user_name, user_name))

    def revoke_token(self, token_id: str) -> bool:
        """Revoke one personal access token; False when no live token has that id."""
        with self.tx() as db:
            cur = db.execute("UPDATE tokens SET revoked = 1 WHERE token_id = ? AND revoked = 0",
                             (token_id,))
        return cur.rowcount == 1

    def revoke_user_tokens(self, user_id: int) -> tuple[int, int]:
        """Revoke every access token and refresh token of a user: ``(tokens, refresh)``."""
        with self.tx() as db:
            pats = db.execute("UPDATE tokens SET revoked = 1 WHERE user_id = ? AND revoked = 0",
                              (user_id,)).rowcount
            refresh = db.execute(
                "UPDATE refresh_tokens SET revoked = 1 WHERE user_id = ? AND revoked = 0",
                (user_id,)).rowcount
        return pats, refresh

    def token(self, token_id: str) -> Row | None:
        return self._one("SELECT * FROM tokens WHERE token_id = ? AND revoked = 0", (token_id,))

    def add_refresh(self, jti: str, user_id: int, expires_at: float) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT INTO refresh_tokens (jti, user_id, expires_at) VALUES (?,?,?)",
                (jti, user_id, expires_at),
            )

    def revoke_refresh(self, jti: str) -> bool:
        """Revoke a refresh token; True only for the caller that revoked it (rotation)."""
        with self.tx() as db:
            cur = db.execute(
                "UPDATE refresh_tokens SET revoked = 1 WHERE jti = ? AND revoked = 0", (jti,)
            )
        return cur.rowcount == 1

    def create_device(self, device_hash: str, user_code: str, client_id: str, scope: str,
                      expires_at: float, interval_s: int, *, purge_before: float,
                      max_pending: int) -> bool:
        """Record a device code after deleting used ones and those that expired before
        ``purge_before`` (recently expired ones stay, so a late poll hears "expired").

        Returns False (nothing written) when the table already holds ``max_pending`` codes,
        so it never holds more than that many rows whoever asks.
        """
        with self.tx() as db:
            db.execute("DELETE FROM device_codes WHERE expires_at <= ? OR status = 'used'",
                       (purge_before,))
            pending = db.execute("SELECT COUNT(*) FROM device_codes").fetchone()[0]
            if pending >= max_pending:
                return False
            db.execute(
                "INSERT INTO device_codes (device_hash, user_code, client_id, scope, expires_at,"
                " interval_s) VALUES (?,?,?,?,?,?)",
                (device_hash, user_code, client_id, scope, expires_at, interval_s),
            )
        return True

    def device(self, device_hash: str) -> Row | None:
        return self._one("SELECT * FROM device_codes WHERE device_hash = ?", (device_hash,))

    def touch_device(self, device_hash: str, at: float) -> None:
        with self.tx() as db:
            db.execute("UPDATE device_codes SET last_poll = ? WHERE device_hash = ?", (at, device_hash))

    def approve_device(self, user_code: str, user_id: int, now: float) -> bool:
        with self.tx() as db:
            cur = db.execute(
                "UPDATE device_codes SET status = 'approved', user_id = ? WHERE user_code = ?"
                " AND status = 'pending' AND expires_at > ?",
                (user_id, user_code, now),
            )
        return cur.rowcount == 1

    def consume_device(self, device_hash: str) -> bool:
        with self.tx() as db:
            cur = db.execute(
                "UPDATE device_codes SET status = 'used' WHERE device_hash = ? AND status = 'approved'",
                (device_hash,),
            )
        return cur.rowcount == 1

    # ---- projects --------------------------------------------------------------------

    def projects(self, user_id: int) -> list[Row]:
        return self._all("SELECT * FROM projects WHERE user_id = ? ORDER BY id", (user_id,))

    def project(self, user_id: int, name: str) -> Row | None:
        return self._one("SELECT * FROM projects WHERE user_id = ? AND name = ?", (user_id, name))

    def create_project(self, user_id: int, name: str, description: str | None,
                       llm_based: bool) -> Row:
        try:
            with self.tx() as db:
                db.execute(
                    "INSERT INTO projects (user_id, name, description, llm_based, created_at)"
                    " VALUES (?,?,?,?,?)",
                    (user_id, name, description, int(llm_based), now_iso()),
                )
        except sqlite3.IntegrityError:
            raise ApiError(409, "PROJECT_EXISTS", f"Project '{name}' already exists") from None
        row = self.project(user_id, name)
        assert row is not None
        return row

    def ensure_project(self, user_id: int, name: str) -> Row:
        existing = self.project(user_id, name)
        if existing is not None:  # the common case needs no write transaction
            return existing
        with self.tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO projects (user_id, name, description, llm_based, created_at)"
                " VALUES (?,?,?,0,?)",
                (user_id, name, "Created automatically for submissions without a project",
                 now_iso()),
            )
        row = self.project(user_id, name)
        assert row is not None
        return row

    def delete_project(self, user_id: int, name: str) -> None:
        with self.tx() as db:
            row = db.execute(
                "SELECT id FROM projects WHERE user_id = ? AND name = ?", (user_id, name)
            ).fetchone()
            if row is None:
                raise ApiError(404, "PROJECT_NOT_FOUND", f"Project '{name}' not found")
            used = db.execute(
                "SELECT COUNT(*) FROM experiments WHERE project_id = ?", (row["id"],)
            ).fetchone()[0]
            if used:
                raise ApiError(
                    409, "PROJECT_NOT_EMPTY",
                    f"Project '{name}' still holds {used} experiment(s)",
                )
            db.execute("DELETE FROM projects WHERE id = ?", (row["id"],))

    # ---- experiments -----------------------------------------------------------------

    _ROW = (
        "SELECT e.*, p.name AS project FROM experiments e JOIN projects p ON p.id = e.project_id"
    )

    def experiment(self, exp_id: int) -> Row | None:
        return self._one(f"{self._ROW} WHERE e.id = ?", (exp_id,))

    def find_experiments(self, user_id: int, name: str, project_id: int | None) -> list[Row]:
        if project_id is None:
            return self._all(f"{self._ROW} WHERE e.user_id = ? AND e.name = ? ORDER BY e.id",
                             (user_id, name))
        return self._all(f"{self._ROW} WHERE e.user_id = ? AND e.name = ? AND e.project_id = ?",
                         (user_id, name, project_id))

    def experiments(self, user_id: int, project_id: int | None) -> list[Row]:
        if project_id is None:
            return self._all(f"{self._ROW} WHERE e.user_id = ? ORDER BY e.id", (user_id,))
        return self._all(f"{self._ROW} WHERE e.user_id = ? AND e.project_id = ? ORDER BY e.id",
                         (user_id, project_id))

    def insert_experiment(self, fields: Row, *, max_active: int) -> tuple[Row, bool]:
        """Record a new PENDING experiment, or return the one its idempotency key made.

        Returns ``(row, created)``. Raises 409 on a name taken in the project and 429 when
        the user already has ``max_active`` jobs waiting or running.
        """
        key = fields.get("idempotency_key")
        with self.tx() as db:
            if key is not None:
                hit = db.execute(
                    "SELECT id FROM experiments WHERE user_id = ? AND idempotency_key = ?",
                    (fields["user_id"], key),
                ).fetchone()
                if hit is not None:
                    return self._existing(hit["id"]), False
            taken = db.execute(
                "SELECT 1 FROM experiments WHERE project_id = ? AND name = ?",
                (fields["project_id"], fields["name"]),
            ).fetchone()
            if taken:
                raise ApiError(409, "NAME_CONFLICT",
                               f"Experiment '{fields['name']}' already exists in this project")
            active = db.execute(
                f"SELECT COUNT(*) FROM experiments WHERE user_id = ? AND state IN ({_ACTIVE_MARKS})",
                (fields["user_id"], *_ACTIVE),
            ).fetchone()[0]
            if active >= max_active:
                raise ApiError(
                    429, "TOO_MANY_JOBS",
                    f"You already have {active} jobs waiting or running (limit {max_active});"
                    " stop one or wait for one to finish",
                    limit=max_active,
                )
            stamp = now_iso()
            cols = dict(fields, state=states.PENDING, created_at=stamp, updated_at=stamp)
            names, marks = ", ".join(cols), ", ".join("?" * len(cols))
            cur = db.execute(f"INSERT INTO experiments ({names}) VALUES ({marks})",
                             tuple(cols.values()))
            exp_id = cur.lastrowid
            db.execute(
                "INSERT INTO transitions (experiment_id, from_state, to_state, reason, at)"
                " VALUES (?, NULL, ?, 'submitted', ?)",
                (exp_id, states.PENDING, stamp),
            )
        row = self.experiment(int(exp_id or 0))
        assert row is not None
        return row, True

    def _existing(self, exp_id: int) -> Row:
        row = self._one(f"{self._ROW} WHERE e.id = ?", (exp_id,))
        assert row is not None
        return row

    def count_active(self, user_id: int) -> int:
        row = self._one(
            f"SELECT COUNT(*) AS n FROM experiments WHERE user_id = ? AND state IN ({_ACTIVE_MARKS})",
            (user_id, *_ACTIVE),
        )
        return int(row["n"]) if row else 0

    def transition(self, exp_id: int, to: str, *, reason: str = "",
                   only_from: tuple[str, ...] | None = None, **fields: object) -> str | None:
        """Move an experiment to ``to`` if the state machine allows it from where it is.

        ``only_from`` narrows the accepted source states further. Returns the previous state,
        or None when the move was not legal (nothing is written then).
        """
        stamp = now_iso()
        with self.tx() as db:
            row = db.execute("SELECT state FROM experiments WHERE id = ?", (exp_id,)).fetchone()
            if row is None:
                return None
            src = row["state"]
            if not states.allowed(src, to) or (only_from is not None and src not in only_from):
                return None
            updates = dict(fields, state=to, updated_at=stamp)
            if to == states.QUEUED:
                updates.setdefault("queued_at", stamp)
            if to == states.STARTING:
                updates["started_at"] = stamp
            if to in states.TERMINAL:
                updates["finished_at"] = stamp
                updates["pid"] = None
            db.execute(
                f"UPDATE experiments SET {_assignments(updates)} WHERE id = ?",
                (*updates.values(), exp_id),
            )
            db.execute(
                "INSERT INTO transitions (experiment_id, from_state, to_state, reason, at)"
                " VALUES (?,?,?,?,?)",
                (exp_id, src, to, reason or None, stamp),
            )
        return str(src)

    def update(self, exp_id: int, **fields: object) -> None:
        """Change non-state columns (steps, pid, ...)."""
        fields["updated_at"] = now_iso()
        with self.tx() as db:
            db.execute(
                f"UPDATE experiments SET {_assignments(fields)} WHERE id = ?",
                (*fields.values(), exp_id),
            )

    def transitions(self, exp_id: int) -> list[Row]:
        return self._all(
            "SELECT from_state, to_state, reason, at FROM transitions WHERE experiment_id = ?"
            " ORDER BY id",
            (exp_id,),
        )

    def queued(self, limit: int) -> list[Row]:
        return self._all(
            f"{self._ROW} WHERE e.state = ? ORDER BY e.queued_at, e.id LIMIT ?",
            (states.QUEUED, limit),
        )

    def in_states(self, wanted: frozenset[str] | set[str]) -> list[Row]:
        marks = ",".join("?" * len(wanted))
        return self._all(f"{self._ROW} WHERE e.state IN ({marks}) ORDER BY e.id",
                         tuple(sorted(wanted)))
