"""``agilerl train M --backend ray`` in subprocesses against a real local two-node Ray
cluster: the same final members as ``agilerl train M``, and checkpoints that resume across
backends (a Ray run resumes locally and the reverse)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agilerl.checkpoint.folder import list_checkpoints

from .test_ray_backend import MUTATION, SELECTION, same

pytest.importorskip("ray")
pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]


def _manifest(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "algorithm": {"name": "DQN", "batch_size": 32, "learn_step": 2},
        "environment": {"name": "CartPole-v1", "num_envs": 2},
        "training": {"max_steps": 400, "evo_steps": 100, "pop_size": 3,
                     "learning_delay": 50, "eval_steps": 50, "checkpoint_steps": 200},
        "replay_buffer": {"max_size": 500},
        "mutation": MUTATION, "tournament_selection": SELECTION,
    }))
    return path


def _train(manifest: Path, run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.cli.main", "train", str(manifest), "--no-verbose",
         "--seed", "5", "--run-dir", str(run_dir), *args],
        cwd=run_dir.parent, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _final(run_dir: Path) -> tuple[list[Any], Any, Any]:
    last = list_checkpoints(run_dir / "checkpoints")[-1]
    assert last.summary["global_step"] == 3 * 400
    return last.member_states(), last.replay_buffer(), last.trainer_state()["loop"]["fitnesses"]


def _first(run_dir: Path) -> Path:
    return list_checkpoints(run_dir / "checkpoints")[0].path


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ray_cli_run_equals_the_local_run_and_resumes_across_backends(ray_cluster, tmp_path):
    manifest = _manifest(tmp_path / "dqn.yaml")
    ray = ("--backend", "ray", "--ray-address", ray_cluster.address)
    _train(manifest, tmp_path / "local")
    _train(manifest, tmp_path / "ray", *ray)
    local = _final(tmp_path / "local")
    assert same(_final(tmp_path / "ray"), local)

    # a local checkpoint resumed on Ray, and a Ray checkpoint resumed locally
    _train(manifest, tmp_path / "local-then-ray", *ray,
           "--resume-from-checkpoint", str(_first(tmp_path / "local")))
    _train(manifest, tmp_path / "ray-then-local",
           "--resume-from-checkpoint", str(_first(tmp_path / "ray")))
    assert same(_final(tmp_path / "local-then-ray"), local)
    assert same(_final(tmp_path / "ray-then-local"), local)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_address_where_no_cluster_answers_is_a_setup_error(tmp_path):
    manifest = _manifest(tmp_path / "dqn.yaml")
    address = f"127.0.0.1:{_closed_port()}"
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(manifest), "--no-verbose",
         "--backend", "ray", "--ray-address", address, "--run-dir", str(tmp_path / "r")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"--ray-address / training.ray_address '{address}'" in done.stderr
    assert "no Ray cluster answers there" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigint_stops_a_ray_run_with_a_checkpoint_that_resumes_locally(ray_cluster, tmp_path):
    import signal
    import time

    manifest = _manifest(tmp_path / "dqn.yaml")
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    run_dir = tmp_path / "ray"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agilerl.cli.main", "train", str(manifest), "--no-verbose",
         "--seed", "5", "--run-dir", str(run_dir), "--backend", "ray",
         "--ray-address", ray_cluster.address],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not list_checkpoints(run_dir / "checkpoints") and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-3000:]
    _train(manifest, tmp_path / "local")
    _train(manifest, tmp_path / "resumed",
           "--resume-from-checkpoint", str(list_checkpoints(run_dir / "checkpoints")[-1].path))
    assert same(_final(tmp_path / "resumed"), _final(tmp_path / "local"))


def test_save_elite_after_a_ray_run_saves_the_elite_and_exits_0(ray_cluster, tmp_path):
    """The elite was fetched from the members' Ray objects after the backend had closed
    its Ray session: the run failed at the very end with exit 4, blaming the environment."""
    from agilerl.algorithms.core.base import RLAlgorithm

    manifest = tmp_path / "ppo.yaml"
    manifest.write_text(yaml.safe_dump({
        "algorithm": {"name": "PPO", "learn_step": 64, "batch_size": 32},
        "environment": {"name": "CartPole-v1", "num_envs": 2},
        "training": {"max_steps": 256, "evo_steps": 128, "pop_size": 2, "eval_steps": 50},
        "mutation": MUTATION, "tournament_selection": SELECTION,
    }))
    run_dir = tmp_path / "ray"
    _train(manifest, run_dir, "--backend", "ray", "--ray-address", ray_cluster.address,
           "--save-elite")
    assert type(RLAlgorithm.load(run_dir / "elite.pt")).__name__ == "PPO"
