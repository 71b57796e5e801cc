"""``agilerl train --workers 2`` stopped by SIGINT, SIGTERM or SIGKILL, or losing a worker:
a clean stop with a checkpoint, or a loud failure naming the member and generation, and no
process of the run left behind."""

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
from tests.training.conftest import TINY_DQN

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(),
                                reason="finds worker processes through /proc")


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_run_outlives_its_test():
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:  # a failed test: stop the whole job (its own session)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen:
    manifest = dict(TINY_DQN, training={**TINY_DQN["training"], "max_steps": 1_000_000,
                                        "evo_steps": 200})
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    env = dict(os.environ, WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agilerl.train", str(path), "--no-verbose", "--seed", "1",
         "--run-dir", str(tmp_path / "run"), "--workers", "2", *extra],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    _STARTED.append(proc)
    return proc


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _member_workers(pid: int) -> list[int]:
    """The processes that train members: forks of the driver (its own command line), or
    the children of a fork server (itself a child of the driver, as is multiprocessing's
    resource tracker)."""
    found = []
    driver = Path(f"/proc/{pid}/cmdline").read_bytes()
    for child in _descendants(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
            parent = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if command == driver or (b"forkserver" in command and parent != pid):
            found.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.communicate()[1]}")
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("timed out waiting for the run")
        time.sleep(0.2)


def _checkpoints(tmp_path: Path) -> list[Path]:
    root = tmp_path / "run" / "checkpoints"
    return sorted(p for p in root.iterdir() if (p / "index.json").exists()) \
        if root.is_dir() else []


def _none_left(pids: list[int], timeout: float = 15) -> bool:
    deadline = time.time() + timeout
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.2)
    return not any(_alive(p) for p in pids)


@pytest.mark.parametrize(("signum", "group", "status"), [
    pytest.param(signal.SIGINT, True, 130, id="sigint-group", marks=pytest.mark.slow),
    pytest.param(signal.SIGTERM, False, 143, id="sigterm-driver"),
])
def test_a_stop_signal_checkpoints_and_stops_every_worker(tmp_path, signum, group, status):
    proc = _start(tmp_path)
    _wait_for(lambda: (tmp_path / "run" / "metrics.csv").exists(), proc)
    workers = _descendants(proc.pid)
    assert len(_member_workers(proc.pid)) == 1  # --workers 2: the driver and one process
    if group:  # Ctrl-C in a terminal: every process of the job gets it
        os.killpg(proc.pid, signum)
    else:
        os.kill(proc.pid, signum)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr
    (checkpoint,) = _checkpoints(tmp_path)
    assert read_checkpoint(checkpoint).pop_size == 3
    assert "--workers 2" in stderr.split("resume with:", 1)[1]
    assert _none_left(workers)


@pytest.mark.slow
def test_killing_the_driver_leaves_no_worker_behind(tmp_path):
    proc = _start(tmp_path)
    _wait_for(lambda: len(_member_workers(proc.pid)) == 1 and
              (tmp_path / "run" / "metrics.csv").exists(), proc)
    workers = _descendants(proc.pid)
    proc.kill()
    proc.communicate(timeout=60)
    assert _none_left(workers), [p for p in workers if _alive(p)]


@pytest.mark.slow
def test_a_killed_worker_fails_the_run_naming_member_and_generation(tmp_path):
    proc = _start(tmp_path, "--checkpoint-steps", "200")
    _wait_for(lambda: bool(_checkpoints(tmp_path)), proc)
    workers = _descendants(proc.pid)
    members = _member_workers(proc.pid)
    assert len(members) == 1  # --workers 2: the driver and one process
    os.kill(members[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 4, stderr
    assert "Traceback" not in stderr
    assert "killed by SIGKILL" in stderr and "member " in stderr and " of generation " in stderr
    named = stderr.split("the last checkpoint, ", 1)[1].split(", is intact")[0]
    assert read_checkpoint(named).trainer_state()["seed"] == 1
    assert _none_left(workers)
