"""The restart rule applied to every state a crashed server can leave behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agilerl.arena.server import states
from agilerl.arena.server.config import ServerConfig
from agilerl.arena.server.scheduler import Scheduler
from agilerl.arena.server.store import Store


def _row(store: Store, user: int, project: int, name: str) -> int:
    row, _ = store.insert_experiment(
        {"user_id": user, "project_id": project, "name": name, "resource_id": "local-cpu",
         "num_nodes": 1, "max_steps": 100, "pop_size": 1}, max_active=100)
    return int(row["id"])


def _walk(store: Store, exp_id: int, *path: str, **fields: Any) -> None:
    for state in path:
        assert store.transition(exp_id, state, **fields) is not None, state


def test_recover_applies_the_documented_rule(tmp_path: Path) -> None:
    cfg = ServerConfig(data_dir=tmp_path / "data", max_restarts=1)
    cfg.ensure_dirs()
    store = Store(cfg.db_path)
    sched = Scheduler(store, cfg)
    user = store.ensure_user("u")["id"]
    project = store.ensure_project(user, "p")["id"]

    written = _row(store, user, project, "pending-written")
    sched.run_dir(written).create({"training": {"max_steps": 100}})
    lost = _row(store, user, project, "pending-lost")
    queued = _row(store, user, project, "queued")
    _walk(store, queued, states.QUEUED)
    stopping = _row(store, user, project, "stopping")
    _walk(store, stopping, states.QUEUED, states.STARTING, states.RUNNING, states.STOPPING)
    running = _row(store, user, project, "running")
    _walk(store, running, states.QUEUED, states.STARTING, states.RUNNING, pid=2**22 + 12345)
    starting = _row(store, user, project, "starting")
    _walk(store, starting, states.QUEUED, states.STARTING)
    spent = _row(store, user, project, "spent")
    _walk(store, spent, states.QUEUED, states.STARTING, states.RUNNING)
    store.update(spent, restarts=1)
    done = _row(store, user, project, "done")
    _walk(store, done, states.QUEUED, states.STARTING, states.RUNNING, states.COMPLETED)

    sched.recover()

    def state(exp_id: int) -> str:
        row = store.experiment(exp_id)
        assert row is not None
        return str(row["state"])

    assert state(written) == states.QUEUED
    assert state(lost) == states.FAILED
    assert state(queued) == states.QUEUED
    assert state(stopping) == states.STOPPED
    assert state(done) == states.COMPLETED
    for exp_id in (running, starting):
        row = store.experiment(exp_id)
        assert row is not None
        assert row["state"] == states.QUEUED and row["attempt"] == 2 and row["restarts"] == 1
        assert row["pid"] is None and row["error"] is None
        moves = [(t["from_state"], t["to_state"]) for t in store.transitions(exp_id)]
        assert moves[-2:] == [(moves[-2][0], states.FAILED), (states.FAILED, states.QUEUED)]
    assert state(spent) == states.FAILED
    spent_row = store.experiment(spent)
    assert spent_row is not None and spent_row["error"] == "Interrupted by a server restart"
    # Re-queued runs keep their place: the oldest submission is first in line.
    order = [r["name"] for r in store.queued(10)]
    assert order == ["pending-written", "queued", "running", "starting"]
    store.close()
