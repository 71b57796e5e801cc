"""A real server on a random loopback port, driven over HTTP with httpx."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agilerl.arena.server.testing import RunningServer, running_server

JOB_SCRIPT = [sys.executable, str(Path(__file__).with_name("job_script.py"))]
TERMINAL = {"COMPLETED", "FAILED", "STOPPED"}


def manifest(max_steps: int = 400, **training: Any) -> dict[str, Any]:
    """A small valid DQN/CartPole manifest."""
    return {
        "algorithm": {"name": "DQN", "batch_size": 32, "lr": 0.001, "learn_step": 1},
        "environment": {"name": "CartPole-v1", "num_envs": 2},
        "training": {"max_steps": max_steps, "evo_steps": 100, "pop_size": 2,
                     "learning_delay": 0, **training},
        "replay_buffer": {"max_size": 1000},
        "tournament_selection": {"tournament_size": 2, "elitism": True},
    }


def ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class Api:
    """Small HTTP helper; every call goes over the socket to the real server."""

    def __init__(self, srv: RunningServer, token: str | None = None) -> None:
        self.srv = srv
        self.http = httpx.Client(base_url=srv.base_url, timeout=30,
                                 headers={"Authorization": f"Bearer {token or srv.token}"})

    def close(self) -> None:
        self.http.close()

    def submit_raw(self, body: dict[str, Any], key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return self.http.post("/api/cli/v1/experiments/jobs/submit", json=body, headers=headers)

    def submit(self, man: dict[str, Any] | None = None, key: str | None = None,
               **fields: Any) -> dict[str, Any]:
        resp = self.submit_raw({"manifest": man or manifest(), **fields}, key)
        assert resp.status_code == 200, resp.text
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        events = ndjson(resp.text)
        last = events[-1]
        assert last["status"] == "completed" and last["stage"] == "submission", events
        return dict(last["detail"])

    def status(self, name: str) -> dict[str, Any]:
        resp = self.http.get("/api/cli/v1/experiments/jobs/status",
                             params={"experiment_name": name})
        assert resp.status_code == 200, resp.text
        return dict(resp.json()["data"])

    def wait(self, name: str, states: set[str], timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            row = self.status(name)
            if row["state"] in states:
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} stuck in {row['state']}, wanted {states}: {row}")
            time.sleep(0.05)

    def logs(self, name: str, **params: Any) -> list[dict[str, Any]]:
        resp = self.http.get("/api/cli/v1/experiments/jobs/logs",
                             params={"experiment_name": name, **params})
        assert resp.status_code == 200, resp.text
        return ndjson(resp.text)

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(path, json=body)


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Any]:
    """``make_server(**config)`` -> (server, api); everything is stopped at test end."""
    stack: list[Any] = []

    def start(**config: Any) -> tuple[RunningServer, Api]:
        config.setdefault("job_command", JOB_SCRIPT)
        # the test worker checkpoints every few hundred steps of long runs (100-byte files)
        config.setdefault("max_checkpoints_per_job", 1000)
        config.setdefault("stop_grace_s", 2.0)
        config.setdefault("device_poll_interval_s", 0)
        cm = running_server(tmp_path / f"srv{len(stack)}", **config)
        srv = cm.__enter__()
        api = Api(srv)
        stack.append((cm, api))
        return srv, api

    yield start
    for cm, api in reversed(stack):
        api.close()
        cm.__exit__(None, None, None)


@pytest.fixture
def server(make_server: Any) -> tuple[RunningServer, Api]:
    return make_server()  # type: ignore[no-any-return]
