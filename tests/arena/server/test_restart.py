"""Server restarts: queued jobs survive, interrupted runs follow the documented rule."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from agilerl.arena.server.testing import create_token, server_process

from .conftest import JOB_SCRIPT, manifest, ndjson

JOBS = "/api/cli/v1/experiments/jobs"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


#: the test worker checkpoints long runs in small increments (100-byte files).
SMALL_CHECKPOINTS = ["--max-checkpoints", "1000"]


class Client:
    def __init__(self, base: str, token: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=30,
                                 headers={"Authorization": f"Bearer {token}"})

    def submit(self, name: str, steps: int) -> None:
        resp = self.http.post(f"{JOBS}/submit", json={
            "manifest": manifest(steps, checkpoint_steps=100), "experiment_name": name})
        assert resp.status_code == 200, resp.text

    def status(self, name: str) -> dict[str, Any]:
        resp = self.http.get(f"{JOBS}/status", params={"experiment_name": name})
        assert resp.status_code == 200, resp.text
        return dict(resp.json()["data"])

    def wait(self, name: str, check: Any, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            row = self.status(name)
            if check(row):
                return row
            assert time.monotonic() < deadline, row
            time.sleep(0.05)


def _pid(data_dir: Path, name: str) -> int:
    db = sqlite3.connect(data_dir / "arena.sqlite3")
    try:
        (pid,) = db.execute("SELECT pid FROM experiments WHERE name = ?", (name,)).fetchone()
    finally:
        db.close()
    return int(pid)


def test_restart_keeps_queue_and_requeues_interrupted_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_token(data)
    job = ["--slots", "1", "--stop-grace", "1", "--job-command", " ".join(JOB_SCRIPT),
           "--job-env", "JOB_STEP_S=0.1", *SMALL_CHECKPOINTS]
    with server_process(data, *job) as (base, proc):
        api = Client(base, token)
        api.submit("runner", 100_000)
        api.submit("waiting-1", 300)
        api.submit("waiting-2", 300)
        api.wait("runner", lambda r: r["latest_checkpoint"] is not None)
        worker = _pid(data, "runner")
        assert _alive(worker)
        proc.send_signal(signal.SIGKILL)  # no chance to clean up
        proc.wait(timeout=10)
        api.http.close()
    assert _alive(worker)  # the orphaned run outlives its server...

    with server_process(data, *job) as (base, _):
        api = Client(base, token)
        deadline = time.monotonic() + 10
        while _alive(worker):  # ...until the new server ends it
            assert time.monotonic() < deadline, "orphaned worker was not stopped"
            time.sleep(0.05)
        row = api.wait("runner", lambda r: r["state"] == "RUNNING" and r["attempt"] == 2)
        moves = [(t["from_state"], t["to_state"], t["reason"]) for t in row["transitions"]]
        assert ("RUNNING", "FAILED", "server restart") in moves
        assert ("FAILED", "QUEUED", "re-queued after server restart") in moves
        logs = ndjson(api.http.get(f"{JOBS}/logs", params={"experiment_name": "runner"}).text)
        assert any(e["message"].startswith("resuming from step_") for e in logs)
        for name in ("waiting-1", "waiting-2"):
            assert api.status(name)["state"] == "QUEUED"  # nothing queued was lost
        api.http.post(f"{JOBS}/stop", json={"experiment_name": "runner"})
        for name in ("waiting-1", "waiting-2"):
            done = api.wait(name, lambda r: r["state"] in {"COMPLETED", "FAILED"})
            assert done["state"] == "COMPLETED" and done["steps"] == 300
        api.http.close()
    # the resumed attempt continued the metrics from its checkpoint: each step once
    rows = (data / "experiments" / "1" / "run" / "metrics.csv").read_text().splitlines()[1:]
    steps = [int(row.split(",")[0]) for row in rows]
    assert steps == sorted(set(steps)) and len(steps) > 1, steps


def test_restart_limit_leaves_run_failed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_token(data)
    job = ["--max-restarts", "0", "--stop-grace", "1", "--job-command", " ".join(JOB_SCRIPT),
           "--job-env", "JOB_STEP_S=0.1", *SMALL_CHECKPOINTS]
    with server_process(data, *job) as (base, proc):
        api = Client(base, token)
        api.submit("once", 100_000)
        api.wait("once", lambda r: r["state"] == "RUNNING")
        proc.send_signal(signal.SIGTERM)  # graceful: the server ends its runs itself
        proc.wait(timeout=20)
        api.http.close()
    with server_process(data, *job) as (base, _):
        api = Client(base, token)
        row = api.status("once")
        assert row["state"] == "FAILED" and row["error"] == "Interrupted by a server restart"
        api.http.close()
    assert os.path.isdir(data / "experiments")
