"""What the ``arena`` command prints for people (in a subprocess, against a real server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agilerl.arena.server.testing import RunningServer


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
