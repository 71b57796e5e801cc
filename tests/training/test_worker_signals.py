"""A stop signal sent to the whole process group (Ctrl-C in a terminal, ``timeout``, systemd,
Kubernetes, Slurm) while env worker processes step the envs, and a worker killed outright.

The run uses CartPole with 3 sub-envs and ``sync: false``: too few sub-envs for the native
NumPy implementation, so the envs are stepped in worker processes
(:class:`~agilerl.envs.ChunkedAsyncVectorEnv`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from agilerl.checkpoint import read_checkpoint

from .conftest import TINY_DQN

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(),
                                reason="finds worker processes through /proc")


def _manifest(tmp_path: Path) -> Path:
    manifest = dict(TINY_DQN, environment={"name": "CartPole-v1", "num_envs": 3, "sync": False},
                    training={**TINY_DQN["training"], "max_steps": 1_000_000, "evo_steps": 300})
    path = tmp_path / "workers.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "agilerl.train", str(_manifest(tmp_path)), "--no-verbose",
         "--seed", "1", "--run-dir", str(tmp_path / "run"), "training.pop_size=2", *extra],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, as a job under a scheduler has
    )


def _workers(pid: int) -> list[int]:
    """The env worker processes of ``pid`` (forked children running the same command)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    command = Path(f"/proc/{pid}/cmdline").read_bytes()
    found = []
    for child in map(int, children):
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes() == command:
                found.append(child)
        except OSError:
            continue
    return found


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.communicate()[1]}")
        if time.time() > deadline:
            proc.kill()
            raise AssertionError("timed out waiting for the run")
        time.sleep(0.2)


def _checkpoints(tmp_path: Path) -> list[Path]:
    root = tmp_path / "run" / "checkpoints"
    return sorted(p for p in root.iterdir() if (p / "index.json").exists()) \
        if root.is_dir() else []


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_to_the_process_group_stops_cleanly(tmp_path, signum, status):
    proc = _start(tmp_path)
    _wait_for(lambda: (tmp_path / "run" / "metrics.csv").exists(), proc)
    workers = _workers(proc.pid)
    assert workers, "the run should step its envs in worker processes"
    os.killpg(proc.pid, signum)  # every process of the job, workers included
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    (checkpoint,) = _checkpoints(tmp_path)
    assert read_checkpoint(checkpoint).pop_size == 2
    assert str(checkpoint) in stderr
    hint = stderr.split("resume with:", 1)[1]
    assert "training.pop_size=2" in hint and "--seed 1" in hint
    assert f"--resume-from-checkpoint {checkpoint}" in hint
    for worker in workers:  # shut down by the trainer, not left behind
        assert not Path(f"/proc/{worker}").exists() or \
            "zombie" in Path(f"/proc/{worker}/status").read_text()


def test_killed_worker_is_named_and_the_last_checkpoint_stays(tmp_path):
    proc = _start(tmp_path, "--checkpoint-steps", "300")
    _wait_for(lambda: bool(_checkpoints(tmp_path)), proc)
    os.kill(_workers(proc.pid)[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 4, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert "'CartPole-v1'" in stderr and "killed by SIGKILL" in stderr
    named = stderr.split("the last checkpoint, ", 1)[1].split(", is intact")[0]
    assert read_checkpoint(named).trainer_state()["seed"] == 1
    assert "--resume-from-checkpoint" in stderr


def test_an_env_never_closed_does_not_hang_interpreter_exit(tmp_path):
    """Workers ignore SIGTERM, the only signal multiprocessing's exit handler sends before
    joining its children: the env stops them itself at exit."""
    script = (
        "import gymnasium as gym\n"
        "from agilerl.envs import ChunkedAsyncVectorEnv\n"
        "env = ChunkedAsyncVectorEnv([lambda: gym.make('CartPole-v1')] * 3, num_processes=2)\n"
        "env.reset(seed=0)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
