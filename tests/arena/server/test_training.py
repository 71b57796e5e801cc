"""The server running the real trainer (``python -m agilerl.train``) on CartPole."""

from __future__ import annotations

from typing import Any

import pytest

from agilerl.arena.server.config import default_job_command

JOBS = "/api/cli/v1/experiments/jobs"


def _tiny(max_steps: int, pop_size: int = 1) -> dict[str, Any]:
    return {
        "algorithm": {"name": "DQN", "batch_size": 16, "lr": 0.001, "learn_step": 1},
        "environment": {"name": "CartPole-v1", "num_envs": 1},
        "training": {"max_steps": max_steps, "evo_steps": 100, "pop_size": pop_size,
                     "learning_delay": 0, "checkpoint_steps": 100},
        "replay_buffer": {"max_size": 1000},
    }


def test_real_dqn_run_completes_with_logs_metrics_checkpoints(make_server: Any) -> None:
    _, api = make_server(job_command=default_job_command())
    api.submit(_tiny(200, pop_size=2), experiment_name="dqn-cartpole")
    row = api.wait("dqn-cartpole", {"COMPLETED", "FAILED"}, timeout=240)
    messages = [e["message"] for e in api.logs("dqn-cartpole") if e["kind"] == "log"]
    assert row["state"] == "COMPLETED", (row, messages[-20:])
    assert "RUNNING" in [t["to_state"] for t in row["transitions"]]
    assert any(m.startswith("Training summary") for m in messages), messages
    ckpts = api.http.get(f"{JOBS}/checkpoints", params={"experiment_name": "dqn-cartpole"})
    steps = [c["steps"] for c in ckpts.json()["data"]]
    assert steps == [100, 200]  # per agent, the unit of max_steps
    assert [c["total_steps"] for c in ckpts.json()["data"]] == [200, 400]
    names = api.http.get("/api/cli/v1/experiments/metrics",
                         params={"experiment_name": "dqn-cartpole"}).json()["data"]
    assert "train/global_step" in names and "eval/mean_fitness" in names
    assert row["steps"] == 200


@pytest.mark.slow
def test_real_dqn_run_resumes_from_its_checkpoint(make_server: Any) -> None:
    _, api = make_server(job_command=default_job_command())
    api.submit(_tiny(200), experiment_name="dqn-resume")
    api.wait("dqn-resume", {"COMPLETED"}, timeout=240)
    resp = api.post(f"{JOBS}/resume", {"experiment_name": "dqn-resume", "max_steps": 300})
    assert resp.status_code == 200, resp.text
    row = api.wait("dqn-resume", {"COMPLETED", "FAILED"}, timeout=240)
    assert row["state"] == "COMPLETED" and row["attempt"] == 2, row
    ckpts = api.http.get(f"{JOBS}/checkpoints", params={"experiment_name": "dqn-resume"})
    assert [c["steps"] for c in ckpts.json()["data"]][-1] == 300
