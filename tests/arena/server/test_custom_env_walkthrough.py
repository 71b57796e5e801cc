"""docs/arena-custom-env.md end to end with the ``arena`` command and the real trainer:
write an environment, validate it, train PPO on it by name, follow the log, download."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from agilerl.arena.server.config import default_job_command
from agilerl.arena.server.testing import RunningServer

from .envsources import EXAMPLES


def arena(srv: RunningServer, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env.update(HOME=str(home), **srv.env())
    return subprocess.run([sys.executable, "-m", "agilerl.arena.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300, cwd=home)


def test_walkthrough_validate_train_follow_download(make_server: Any, tmp_path: Path) -> None:
    srv, _ = make_server(allow_custom_code=True, job_command=default_job_command(),
                         env_profile_s=0.5)
    home = tmp_path / "home"
    shutil.copytree(EXAMPLES, home)  # line_world/ and ppo_line_world.yaml, as in the docs

    done = arena(srv, home, "env", "validate", "LineWorld", "--source", "line_world",
                 "--do-rollouts", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["validated"] is True and result["entrypoint"] == "line_world:LineWorld"
    print(f"upload -> validated: {result['validation_s']} s")  # noqa: T201 - the figure
    listed = arena(srv, home, "env", "list", "--json")
    assert json.loads(listed.stdout) == {"LineWorld": {"v1": {"validated": True,
                                                              "profiled": True}}}
    copied = arena(srv, home, "env", "duplicate", "LineWorld", "v2")
    assert copied.returncode == 0 and "Copied LineWorld:v1 to LineWorld:v2" in copied.stdout

    run = arena(srv, home, "experiments", "submit", "ppo_line_world.yaml",
                "--experiment-name", "line-ppo", "--follow")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Training summary" in run.stdout + run.stderr
    assert "ended: COMPLETED" in run.stderr

    got = arena(srv, home, "experiments", "download", "line-ppo", "-o", "elite.tar.gz")
    assert got.returncode == 0, got.stderr
    with tarfile.open(home / "elite.tar.gz") as tar:
        tar.extractall(home / "elite", filter="data")
    from agilerl.checkpoint.folder import read_checkpoint

    checkpoint = read_checkpoint(next((home / "elite").glob("*/index.json")).parent)
    assert checkpoint.pop_size == 2 and checkpoint.member_state(0)
    saved = checkpoint.manifest()
    assert saved is not None
    assert saved["environment"]["entrypoint"] == "line_world:LineWorld"
    assert saved["environment"]["config"] == {"size": 6}
