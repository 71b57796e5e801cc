"""A server started with ``--ray-address``: jobs run on a real local two-node Ray cluster,
over real HTTP on loopback."""

from __future__ import annotations

from typing import Any

import pytest

from agilerl.arena.server.config import default_job_command

pytest.importorskip("ray")
pytestmark = pytest.mark.ray

JOBS = "/api/cli/v1/experiments/jobs"


def _job(max_steps: int = 200) -> dict[str, Any]:
    return {
        "algorithm": {"name": "DQN", "batch_size": 16, "lr": 0.001, "learn_step": 1},
        "environment": {"name": "CartPole-v1", "num_envs": 1},
        "training": {"max_steps": max_steps, "evo_steps": 100, "pop_size": 2,
                     "learning_delay": 0, "checkpoint_steps": 100},
        "replay_buffer": {"max_size": 1000},
    }


def test_resources_are_the_clusters_nodes_and_too_many_nodes_are_refused(
        make_server: Any, ray_cluster: Any) -> None:
    _, api = make_server(ray_address=ray_cluster.address)
    tiers = api.http.get("/api/cli/v1/resources/list").json()["data"]["tiers"]
    assert list(tiers) == ["ray-1cpu"], tiers
    tier = tiers["ray-1cpu"]
    assert (tier["nodes"], tier["num_cpus"], tier["num_gpus"]) == (2, 1, 0)
    resp = api.submit_raw({"manifest": _job(), "num_nodes": 3, "experiment_name": "three"})
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert "num_nodes=3" in body["error"] and "2 alive nodes" in body["error"], body
    assert api.http.get("/api/cli/v1/experiments/list").json()["data"] == []


def test_a_two_node_job_runs_on_the_cluster_to_completed_with_checkpoints(
        make_server: Any, ray_cluster: Any) -> None:
    _, api = make_server(job_command=default_job_command(), ray_address=ray_cluster.address)
    detail = api.submit(_job(), experiment_name="two-nodes", num_nodes=2)
    assert detail["num_nodes"] == 2 and detail["resource_id"] == "ray-1cpu"
    row = api.wait("two-nodes", {"COMPLETED", "FAILED"}, timeout=300)
    messages = [e["message"] for e in api.logs("two-nodes") if e["kind"] == "log"]
    assert row["state"] == "COMPLETED", (row, messages[-30:])
    ckpts = api.http.get(f"{JOBS}/checkpoints", params={"experiment_name": "two-nodes"})
    assert [c["steps"] for c in ckpts.json()["data"]] == [100, 200]
    # the job's two actors ran on two distinct nodes, in the placement group it was given
    assert any("2 Ray actors on 2 nodes" in m for m in messages), messages[-30:]
    assert any(m.startswith("Training summary") for m in messages), messages[-30:]


def test_serve_refuses_an_unreachable_ray_address(tmp_path: Any) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.arena.server.cli", "serve", "--port", "0",
         "--data-dir", str(tmp_path / "data"), "--ray-address", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_gpu_node_is_its_own_tier_named_by_its_gpus_and_cpus() -> None:
    from agilerl.arena.server.cluster import node_shape

    gpu = node_shape({"CPU": 16.0, "GPU": 2.0, "accelerator_type:A100": 1.0,
                      "memory": 64 * 2**30})
    assert (gpu.tier_id, gpu.gpus, gpu.gpu_type, gpu.ram_gb) == ("ray-2xa100-16cpu", 2, "A100",
                                                                 64.0)
    assert node_shape({"CPU": 4.0, "memory": 2**30}).tier_id == "ray-4cpu"
