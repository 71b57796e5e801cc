"""``python -m agilerl.train`` / ``agilerl train`` in subprocesses: success, errors, Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .conftest import TINY_DQN

REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return env


def _train(*args: object, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agilerl.train", *map(str, args)],
        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout,
    )


def test_cli_trains_and_writes_run_folder(tiny_dqn_file, tmp_path):
    run_dir = tmp_path / "run"
    done = _train(tiny_dqn_file, "--no-verbose", "--seed", 1, "--run-dir", run_dir,
                  "--save-elite", "training.pop_size=2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (run_dir / "metrics.csv").is_file()
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 3  # header + one row per generation
    resolved = yaml.safe_load((run_dir / "manifest.yaml").read_text())
    assert resolved["training"]["pop_size"] == 2  # the override is in the resolved manifest
    assert (run_dir / "elite.pt").is_file()


def test_agilerl_train_subcommand(tiny_dqn_file, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.cli.main", "train", str(tiny_dqn_file), "--no-verbose",
         "--seed", "1", "--run-dir", str(tmp_path / "r"), "training.max_steps=200"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "metrics.csv").is_file()


@pytest.mark.parametrize(
    ("override", "code", "needle"),
    [
        ("training.pop_size=0", 1, "training.pop_size=0"),
        ("algorithm.lr=-1", 1, "algorithm.lr=-1"),
        ("training.pop_size", 2, "expected PATH=VALUE"),
        ("algorithm.lr=[1,", 2, "not valid YAML"),
    ],
)
def test_bad_override_is_named(tiny_dqn_file, tmp_path, override, code, needle):
    done = _train(tiny_dqn_file, "--no-verbose", override, cwd=tmp_path)
    assert done.returncode == code, done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr


def test_invalid_manifest_points_at_file_line(tmp_path):
    bad = dict(TINY_DQN, training={**TINY_DQN["training"], "pop_size": -3})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad, sort_keys=False))
    done = _train(path, "--no-verbose", cwd=tmp_path)
    assert done.returncode == 1
    assert "training.pop_size" in done.stderr and f"{path}:" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("make", "needle"), [
    (lambda tmp: Path("/dev/zero"), "is not a regular file"),
    (lambda tmp: tmp, "is a folder, expected a file"),
], ids=["device", "folder"])
def test_manifest_that_is_not_a_regular_file_is_named(tmp_path, make, needle):
    done = _train(make(tmp_path), cwd=tmp_path, timeout=30)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    assert "does not exist" not in done.stderr


def test_missing_manifest_and_bad_checkpoint(tiny_dqn_file, tmp_path):
    done = _train(tmp_path / "nope.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "does not exist" in done.stderr
    (tmp_path / "empty").mkdir()
    done = _train(tiny_dqn_file, "--resume-from-checkpoint", tmp_path / "empty", cwd=tmp_path)
    assert done.returncode == 2 and "index.json" in done.stderr
    assert "Traceback" not in done.stderr


def _long_manifest(tmp_path: Path) -> Path:
    manifest = dict(TINY_DQN, training={**TINY_DQN["training"], "max_steps": 1_000_000,
                                        "evo_steps": 400})
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_stop_signal_writes_checkpoint_and_exits_128_plus_signal(tmp_path, signum, status):
    path = _long_manifest(tmp_path)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agilerl.train", str(path), "--no-verbose", "--seed", "1",
         "--run-dir", str(run_dir)],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.time() + 60
    while not (run_dir / "metrics.csv").exists() and time.time() < deadline:
        time.sleep(0.2)  # wait until training is under way (a generation finished)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status, stderr
    assert "Traceback" not in stderr
    checkpoints = [p for p in (run_dir / "checkpoints").iterdir() if (p / "index.json").exists()]
    assert len(checkpoints) == 1
    assert f"stopped by {signal.Signals(signum).name}" in stderr
    assert str(checkpoints[0]) in stderr  # says where the checkpoint is
    # and the run resumes from it
    done = _train(path, "--no-verbose", "--resume-from-checkpoint", checkpoints[0],
                  "training.max_steps=2000", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_sigterm_while_starting_stops_with_143(tmp_path):
    """A job stopped while it is still starting up exits like one stopped while training
    (whether the signal lands during the imports or in the first member)."""
    path = _long_manifest(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agilerl.train", str(path), "--seed", "1",
         "--run-dir", str(tmp_path / "run")],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # printed before the heavy imports
    assert "Validating" in first
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "stopped by SIGTERM" in stderr and "Traceback" not in stderr


def test_resume_into_the_same_run_folder_logs_each_step_once(tiny_dqn_file, tmp_path):
    """Resuming from an earlier checkpoint into the run folder that already holds later rows:
    metrics.csv ends with each generation once, as the uninterrupted run wrote it."""
    run_dir = tmp_path / "run"
    done = _train(tiny_dqn_file, "--no-verbose", "--seed", 1, "--run-dir", run_dir,
                  "--checkpoint-steps", 200, "training.pop_size=2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    uninterrupted = (run_dir / "metrics.csv").read_text().splitlines()
    first = sorted(p for p in (run_dir / "checkpoints").iterdir() if (p / "index.json").exists())
    done = _train(tiny_dqn_file, "--no-verbose", "--run-dir", run_dir,
                  "--resume-from-checkpoint", first[0], "training.pop_size=2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    resumed = (run_dir / "metrics.csv").read_text().splitlines()
    steps = [line.split(",")[0] for line in resumed[1:]]
    assert len(steps) == len(set(steps)) == len(uninterrupted) - 1
    assert steps == [line.split(",")[0] for line in uninterrupted[1:]]


def test_missing_device_is_named_before_anything_is_built(tiny_dqn_file, tmp_path):
    done = _train(tiny_dqn_file, "--device", "cuda:3", cwd=tmp_path)
    assert done.returncode == 2
    assert "device 'cuda:3' is not available" in done.stderr
    assert "Building" not in done.stdout and "Traceback" not in done.stderr


def test_a_library_frame_with_a_relative_file_name_is_not_the_environments_code(tmp_path,
                                                                                 monkeypatch):
    """Compiled (Cython) library frames carry a relative source name such as Ray's
    ``python/ray/includes/common.pxi``; resolved against the working folder it looked like a
    user's file, and a library error was reported as the environment's (exit 4)."""
    from agilerl.cli.failure_context import user_code_frame

    monkeypatch.chdir(tmp_path)
    code = compile("raise ValueError('owner unknown')", "python/ray/includes/common.pxi", "exec")
    with pytest.raises(ValueError) as caught:
        exec(code)
    assert user_code_frame(caught.value) is None

    user_file = tmp_path / "my_env.py"
    user_file.write_text("raise ValueError('bad reset')\n")
    with pytest.raises(ValueError) as caught:
        exec(compile(user_file.read_text(), str(user_file), "exec"))
    assert user_code_frame(caught.value) == f"{user_file.resolve()}:1"
