"""What the ``arena`` command prints for people (in a subprocess, against a real server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from agilerl.arena.server.testing import RunningServer

from .conftest import manifest


def arena(srv: RunningServer, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env.update(HOME=str(home), **srv.env())
    home.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "agilerl.arena.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120, cwd=home)


def test_env_list_without_envs_says_so_and_how_to_see_the_builtin_ones(
        server: Any, tmp_path: Path) -> None:
    srv, _ = server
    out = arena(srv, tmp_path / "home", "env", "list")
    assert out.returncode == 0, out.stderr
    assert "No environments of your own yet" in out.stdout
    assert "--include-arena" in out.stdout and "Field" not in out.stdout
    builtin = arena(srv, tmp_path / "home", "env", "list", "--include-arena", "--name", "CartPole")
    assert builtin.returncode == 0 and "CartPole-v1" in builtin.stdout, builtin.stderr
    none = arena(srv, tmp_path / "home", "env", "list", "--name", "Nope")
    assert "No environments matching 'Nope'" in none.stdout


def test_experiments_status_prints_a_summary_and_json_on_request(
        server: Any, tmp_path: Path) -> None:
    srv, api = server
    name = api.submit(manifest(max_steps=400))["experiment_name"]
    api.wait(name, {"COMPLETED"})
    out = arena(srv, tmp_path / "home", "experiments", "status", name)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(None, 1) if not line.startswith(("Best", "Elite")) else
                 (line[:12], line[12:].strip()) for line in out.stdout.splitlines())
    assert lines["Status"] == "COMPLETED"
    assert lines["Steps"] == "400 / 400 per agent"
    assert lines["Generation"] == "4"
    assert lines["Best fitness"] == f"{400 % 7:.4g}" and lines["Elite member"] == "1"
    for label in ("Experiment", "Algorithm", "Checkpoint", "Created", "Started", "Finished"):
        assert label in lines, out.stdout
    as_json = arena(srv, tmp_path / "home", "experiments", "status", name, "--json")
    row = json.loads(as_json.stdout)
    assert row["state"] == "COMPLETED" and row["latest_checkpoint"]["elite_member"] == 1
    missing = arena(srv, tmp_path / "home", "experiments", "status", "nope")
    assert missing.returncode == 1 and "Experiment 'nope' not found" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_download_help_uses_real_names_and_a_wrong_name_lists_the_real_ones(
        server: Any, tmp_path: Path) -> None:
    srv, api = server
    usage = arena(srv, tmp_path / "home", "experiments", "download", "--help")
    assert "gen00003-step0000015000" in usage.stdout and "step_5000" not in usage.stdout
    name = api.submit(manifest(max_steps=200))["experiment_name"]
    api.wait(name, {"COMPLETED"})
    wrong = arena(srv, tmp_path / "home", "experiments", "download", name,
                  "--checkpoint", "step_5000")
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr
    assert "Checkpoint 'step_5000' not found" in wrong.stderr
    assert "it has step_120, step_140, step_160, step_180, step_200 (newest 5" in wrong.stderr


_ECHO_JOB = [sys.executable, "-c", "import sys; print('Validating', sys.argv[1], '...');"
             " print(sys.argv[1] + ':12:3: training.max_steps: boom', file=sys.stderr)"]


def test_the_job_log_cites_the_users_file_not_the_servers_copy(
        make_server: Any, tmp_path: Path) -> None:
    srv, api = make_server(job_command=_ECHO_JOB)
    home = tmp_path / "home"
    home.mkdir()
    (home / "my_run.yaml").write_text(yaml.safe_dump(manifest()))
    run = arena(srv, home, "experiments", "submit", "my_run.yaml", "--experiment-name",
                "cited", "--follow")
    assert run.returncode == 0, run.stderr
    assert "Validating my_run.yaml ..." in run.stdout
    assert "my_run.yaml: training.max_steps: boom" in run.stdout
    assert str(srv.data_dir) not in run.stdout + run.stderr
    api.submit(manifest(), experiment_name="from-a-dict")  # no file name: says so
    api.wait("from-a-dict", {"COMPLETED", "FAILED"})
    lines = [e["message"] for e in api.logs("from-a-dict") if "message" in e]
    assert "Validating the submitted manifest ..." in lines, lines
