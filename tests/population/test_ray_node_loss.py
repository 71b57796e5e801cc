"""A Ray node lost in the middle of ``agilerl train --backend ray`` (its raylet, or its
dashboard agent, which the raylet goes down with, SIGKILLed as a machine fault would): the
driver moves the lost members to the remaining actors and ends the run as a run without the
fault, or, where nothing can take them, stops within the recovery timeout naming the lost
node and the checkpoint to resume from. Each test has its own local cluster (one is broken
by it) and bounds the driver's run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from agilerl.checkpoint.folder import list_checkpoints

from .test_ray_backend import MUTATION, SELECTION, same

pytest.importorskip("ray")
pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
#: What the driver may take, from the fault to its end: recovery timeout, the cluster
#: noticing the loss, and the rest of the run (on two shared cores).
BOUND_S = 150
RECOVERY_TIMEOUT = "8"


def _manifest(path: Path, max_steps: int = 1024) -> Path:
    path.write_text(yaml.safe_dump({
        "algorithm": {"name": "PPO", "learn_step": 64, "batch_size": 32},
        "environment": {"name": "CartPole-v1", "num_envs": 2},
        "training": {"max_steps": max_steps, "evo_steps": 256, "pop_size": 2,
                     "eval_steps": 50, "checkpoint_steps": 256},
        "mutation": MUTATION, "tournament_selection": SELECTION,
    }))
    return path


def _env(cluster: Any) -> dict[str, str]:
    return {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO), "HOME": cluster.env["HOME"],
            "AGILERL_RAY_RECOVERY_TIMEOUT": RECOVERY_TIMEOUT}


def _train_and_kill(cluster: Any, manifest: Path, run_dir: Path, node: int,
                    process: str) -> tuple[int, str, float]:
    """Train on ``cluster``; once the first checkpoint is complete, SIGKILL ``process`` of
    ``node``; the driver's exit status, stderr and seconds from the kill to its end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agilerl.cli.main", "train", str(manifest), "--no-verbose",
         "--seed", "5", "--run-dir", str(run_dir), "--backend", "ray",
         "--ray-address", cluster.address],
        cwd=run_dir.parent, env=_env(cluster), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        # A complete checkpoint (its index written), not a folder still being written: a
        # kill in between leaves nothing to resume from, which is not what is tested.
        while not list_checkpoints(run_dir / "checkpoints") and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert cluster.kill(node, process), f"no {process} on node {node}"
        killed = time.monotonic()
        try:
            _, stderr = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the driver still runs {BOUND_S} s after {process} of node {node} "
                        "was killed")
        return proc.returncode, stderr, time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _local_run(manifest: Path, run_dir: Path) -> list[Any]:
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.cli.main", "train", str(manifest), "--no-verbose",
         "--seed", "5", "--run-dir", str(run_dir)],
        cwd=run_dir.parent, env={**os.environ, "WANDB_MODE": "offline",
                                 "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return list_checkpoints(run_dir / "checkpoints")[-1].member_states()


def _recovered(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "was lost" in stderr and "move to the remaining actors" in stderr, stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("process", ["raylet", "ray::DashboardAgent"])
def test_a_lost_worker_node_moves_its_members_and_the_run_ends_as_without_it(tmp_path, process):
    """A worker node goes (its raylet killed, or its dashboard agent, which takes the raylet
    down with it): its members move to the other node and the run ends as a local run of the
    same seed. Before: the driver waited for ever (400 s+) for a new actor no node could
    hold, or exited 1 without a word."""
    from agilerl.population.ray_cluster import local_ray_cluster

    manifest = _manifest(tmp_path / "ppo.yaml")
    with local_ray_cluster(nodes=2, cpus_per_node=1) as cluster:
        code, stderr, _ = _train_and_kill(cluster, manifest, tmp_path / "ray", 1, process)
    assert code == 0, stderr[-3000:]
    _recovered(stderr)
    final = list_checkpoints(tmp_path / "ray" / "checkpoints")[-1]
    assert final.summary["global_step"] == 2 * 1024
    assert same(final.member_states(), _local_run(manifest, tmp_path / "local"))


@pytest.mark.parametrize("process", ["raylet", "ray::DashboardAgent"])
def test_a_lost_node_nothing_can_replace_stops_the_run_in_bounded_time(tmp_path, process):
    """Every actor on the one worker node (the head has no CPU): when it goes (its raylet,
    or its dashboard agent, killed), nothing can take its members; the driver stops within
    the recovery timeout, naming the node and the checkpoint to resume from, with no
    traceback, and that checkpoint is intact. Before: the driver hung (400 s+)."""
    from agilerl.population.ray_cluster import local_ray_cluster

    manifest = _manifest(tmp_path / "ppo.yaml", max_steps=4096)
    with local_ray_cluster(nodes=2, cpus_per_node=2, head_cpus=0) as cluster:
        code, stderr, seconds = _train_and_kill(cluster, manifest, tmp_path / "ray", 1,
                                                process)
    assert code == 4, stderr[-3000:]
    assert seconds < 60, f"{seconds:.0f} s from the fault to the driver's end"
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "training stopped: member" in stderr and "Ray node" in stderr, stderr[-3000:]
    assert f"within {RECOVERY_TIMEOUT} s (AGILERL_RAY_RECOVERY_TIMEOUT)" in stderr, stderr
    last = list_checkpoints(tmp_path / "ray" / "checkpoints")[-1]
    assert f"the last checkpoint, {last.path}, is intact; resume with:" in stderr, stderr
    assert len(last.member_states()) == 2  # readable: what was saved is not lost




@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf", "nan"])
def test_a_recovery_timeout_that_is_not_a_positive_number_is_named(value, monkeypatch):
    from agilerl.core.errors import TrainingSetupError
    from agilerl.population.ray_driver import recovery_timeout as _recovery_timeout

    monkeypatch.setenv("AGILERL_RAY_RECOVERY_TIMEOUT", value)
    with pytest.raises(TrainingSetupError, match=f"AGILERL_RAY_RECOVERY_TIMEOUT = '{value}'"):
        _recovery_timeout()


def test_a_killed_dashboard_agent_on_the_drivers_node_is_reported(tmp_path):
    """The head's dashboard agent, on the driver's node: the head's raylet goes down with it
    and Ray ends the driver, usually at once (exit 1, no message, no Python cleanup). Before: exit 1
    and nothing said. Now the command names the cause and the checkpoint to resume from."""
    from agilerl.population.ray_cluster import local_ray_cluster

    manifest = _manifest(tmp_path / "ppo.yaml")
    with local_ray_cluster(nodes=2, cpus_per_node=1) as cluster:
        code, stderr, seconds = _train_and_kill(cluster, manifest, tmp_path / "ray", 0,
                                                "ray::DashboardAgent")
    assert code == 4, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    # Ray usually ends the driver at once; sometimes the driver first sees its members'
    # actors go with the node, and names that instead. Either way the cause is named.
    assert ("training stopped: the Ray driver ended without a report" in stderr
            or ("training stopped: member" in stderr and "was lost" in stderr)), stderr
    last = list_checkpoints(tmp_path / "ray" / "checkpoints")[-1]
    assert f"the last checkpoint, {last.path}, is intact; resume with:" in stderr, stderr
    assert len(last.member_states()) == 2
