"""A job cannot widen its own privileges or budget by rewriting the files of its
experiment folder (issue 20, item 1): the uploaded-env binding and the manifest the
server builds a (re)launch from are the server's copies, not the job's."""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agilerl.arena.server.sandbox import landlock_abi
from agilerl.arena.server.testing import running_server

from ..conftest import Api, manifest
from ..envsources import LINE_WORLD
from ..test_custom_envs import last, upload

HOSTILE = Path(__file__).with_name("hostile_job.py")


def _lines(api: Api, name: str) -> list[str]:
    return [e["message"] for e in api.logs(name) if e["kind"] == "log"]


def _wait_for_line(api: Api, name: str, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in _lines(api, name):
        assert time.monotonic() < deadline, (api.status(name), _lines(api, name))
        time.sleep(0.1)


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_a_resumed_job_keeps_the_grants_and_budget_it_was_given(tmp_path: Path) -> None:
    data, plan = tmp_path / "data", tmp_path / "plan.json"
    plan.write_text(json.dumps({"mode": "widen", "env": "LineWorld"}))
    config: dict[str, Any] = dict(data_dir=data, allow_custom_code=True, env_profile_s=0.3,
                                  stop_grace_s=1.0, device_poll_interval_s=0,
                                  job_command=[sys.executable, str(HOSTILE), str(plan)])
    man = manifest(200, checkpoint_steps=50)
    man["environment"] = {"name": "LineWorld", "num_envs": 1}
    with running_server(tmp_path / "a", **config) as srv:
        api = Api(srv)
        assert last(upload(api, "LineWorld", {"line_world.py": LINE_WORLD}))["status"] \
            == "completed"
        api.submit(man, experiment_name="widen")
        _wait_for_line(api, "widen", "widened")
        api.close()
    # the server went away with the job RUNNING: the next one re-queues it (resume)
    with running_server(tmp_path / "b", **config) as srv:
        api = Api(srv)
        row = api.wait("widen", {"COMPLETED", "FAILED"}, timeout=60)
        lines = _lines(api, "widen")
        api.close()
    assert row["state"] == "COMPLETED", (row, lines)
    seen = [json.loads(line) for line in lines if line.startswith("{")]
    resumed = next(s for s in seen if s.get("resumed"))
    reads = next(s for s in seen if "jwt_secret" in s)
    assert reads["jwt_secret"].startswith("denied"), reads
    assert reads["database"].startswith("denied"), reads
    argv = resumed["argv"]
    assert argv[argv.index("--checkpoint-steps") + 1] == "50", argv
    assert resumed["manifest_training"]["max_steps"] == 200, resumed
    assert resumed["manifest_training"]["pop_size"] == 2, resumed
    db = sqlite3.connect(data / "arena.sqlite3")
    try:
        assert db.execute("SELECT max_steps, pop_size FROM experiments").fetchone() == (200, 2)
    finally:
        db.close()
