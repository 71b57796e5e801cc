"""nofollow: the server's file operations on folders a job or upload can write; and the
database columns that keep what a launch is built from out of those folders."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from agilerl.arena.server import env_jobs, nofollow
from agilerl.arena.server.store import Store


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "file.txt").write_text("mine")
    return folder


def test_reads_refuse_links_anywhere_on_the_path(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not yours")
    (root / "link.txt").symlink_to(secret)
    (root / "linked").symlink_to(root / "sub")
    assert nofollow.read_bytes(root, "sub/file.txt") == b"mine"
    for rel in ("link.txt", "linked/file.txt"):
        with pytest.raises(nofollow.Refused, match="link") as err:
            nofollow.read_bytes(root, rel)
        assert "not yours" not in str(err.value)
    for rel in ("../secret", "/etc/passwd", "sub/../../secret"):
        with pytest.raises(nofollow.Refused):
            nofollow.read_bytes(root, rel)
    with pytest.raises(FileNotFoundError):
        nofollow.read_bytes(root, "missing")


def test_special_and_oversized_files_are_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "fifo")
    done = threading.Event()

    def read() -> None:
        with pytest.raises(nofollow.Refused, match="regular"):
            nofollow.read_bytes(root, "fifo")
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "reading a FIFO blocked"
    with pytest.raises(nofollow.Refused, match="larger"):
        nofollow.read_bytes(root, "sub/file.txt", limit=2)
    with pytest.raises(nofollow.Refused):
        nofollow.open_append(root, "fifo")


def test_writes_replace_a_planted_link_and_never_write_through_it(root: Path,
                                                                  tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("precious")
    (root / "out.json").symlink_to(target)
    nofollow.write_atomic(root, "out.json", b"{}")
    assert target.read_text() == "precious"
    assert not (root / "out.json").is_symlink() and (root / "out.json").read_text() == "{}"
    (root / "dirlink").symlink_to(tmp_path)
    with pytest.raises(nofollow.Refused):
        nofollow.write_atomic(root, "dirlink/x", b"no")
    assert not (tmp_path / "x").exists()
    nofollow.write_atomic(root, "new/deeper/file", b"made")  # missing folders are made
    assert (root / "new" / "deeper" / "file").read_bytes() == b"made"
    (root / "log").symlink_to(target)
    with pytest.raises(nofollow.Refused):
        nofollow.open_append(root, "log")


def test_walk_reports_links_and_never_enters_them(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs").write_text("x")
    (root / "sub" / "away").symlink_to(outside)
    kinds = {e.rel: e.kind for e in nofollow.walk(root)}
    assert kinds == {"sub": "dir", "sub/file.txt": "file", "sub/away": "other"}
    assert nofollow.walk(root, "sub/away") == []
    assert nofollow.walk(root, "missing") == []
    found = nofollow.entry(root, "sub/away")
    assert found is not None and found.kind == "other"


def test_older_databases_gain_the_launch_columns(tmp_path: Path) -> None:
    path = tmp_path / "arena.sqlite3"
    from agilerl.arena.server import store

    old = store._SCHEMA.replace("    manifest TEXT,\n    custom_env TEXT,\n", "")
    assert old != store._SCHEMA
    db = sqlite3.connect(path)
    db.executescript(old)
    db.execute("INSERT INTO users (name, created_at) VALUES ('u', 'now')")
    db.execute("INSERT INTO projects (user_id, name, created_at) VALUES (1, 'p', 'now')")
    db.execute("INSERT INTO experiments (user_id, project_id, name, state, resource_id,"
               " num_nodes, max_steps, pop_size, created_at, updated_at)"
               " VALUES (1, 1, 'old', 'COMPLETED', 'cpu', 1, 10, 1, 'now', 'now')")
    db.commit()
    db.close()
    Store(path).close()
    db = sqlite3.connect(path)
    try:
        cols = {r[1] for r in db.execute("PRAGMA table_info(experiments)")}
        assert {"manifest", "custom_env"} <= cols
        assert db.execute("SELECT name, manifest, custom_env FROM experiments").fetchall() \
            == [("old", None, None)]
    finally:
        db.close()


def test_a_legacy_binding_is_trusted_only_for_the_owners_own_env(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = data / "experiments" / "7"
    folder.mkdir(parents=True)
    env = data / "environments" / "3" / "World" / "v1"
    own = {"name": "World", "version": "v1", "source": str(env / "source"),
           "venv": str(env / "venv")}
    row = {"id": 7, "user_id": 3, "custom_env": None}
    (folder / "custom_env.json").write_text(json.dumps(own))
    assert env_jobs.binding_of(row, data) == env_jobs.Binding(**own)
    for widened in ({**own, "source": str(data)}, {**own, "venv": "/"}, {**own, "name": ".."}):
        (folder / "custom_env.json").write_text(json.dumps(widened))
        assert env_jobs.binding_of(row, data) is None
    # a row recorded now never looks at the folder
    (folder / "custom_env.json").write_text(json.dumps(own))
    assert env_jobs.binding_of({**row, "custom_env": "null"}, data) is None


def test_a_legacy_manifest_is_imported_once_then_the_folder_is_ignored(tmp_path: Path) -> None:
    from agilerl.arena.server.config import ServerConfig
    from agilerl.arena.server.scheduler import Scheduler

    config = ServerConfig(data_dir=tmp_path / "data")
    config.ensure_dirs()
    store = Store(config.db_path)
    try:
        user = store.ensure_user("u")
        project = store.ensure_project(user["id"], "p")
        row, _ = store.insert_experiment(
            {"user_id": user["id"], "project_id": project["id"], "name": "old",
             "resource_id": "cpu", "num_nodes": 1, "max_steps": 10, "pop_size": 2},
            max_active=5)
        assert row["manifest"] is None  # as recorded before the column existed
        folder = config.experiments_dir / str(row["id"])
        folder.mkdir()
        (folder / "manifest.json").write_text(json.dumps({"training": {"pop_size": 2}}))
        scheduler = Scheduler(store, config)
        assert scheduler.manifest_of(row) == {"training": {"pop_size": 2}}
        (folder / "manifest.json").write_text(json.dumps({"training": {"pop_size": 64}}))
        fresh = store.experiment(row["id"])
        assert fresh is not None
        assert scheduler.manifest_of(fresh) == {"training": {"pop_size": 2}}
        assert scheduler.run_dir(row["id"]).agents == 2
    finally:
        store.close()
