"""Issue 23 item 8 (part): command-line conventions, each command run in a subprocess."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import agilerl

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "configs" / "training" / "dqn.yaml"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)


@pytest.mark.parametrize(("module", "prog"), [("agilerl", "agilerl"),
                                              ("agilerl.arena.cli", "arena"),
                                              ("agilerl.arena.server.cli", "arena-server")])
def test_version_on_every_command(module, prog):
    done = _run("-m", module, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(prog) and agilerl.__version__ in done.stdout


def test_python_dash_m_agilerl_is_the_agilerl_command():
    done = _run("-m", "agilerl", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: agilerl")


def test_a_bad_flag_after_train_prints_trains_usage():
    done = _run("-m", "agilerl", "train", str(MANIFEST), "--bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: agilerl train")
    assert "agilerl train: error: unrecognized arguments: --bogus" in done.stderr


def test_show_takes_overrides_like_train():
    done = _run("-m", "agilerl", "show", str(MANIFEST), "training.pop_size=3", "--json",
                "algorithm.lr=3e-4")
    assert done.returncode == 0, done.stderr
    resolved = json.loads(done.stdout)
    assert resolved["training"]["pop_size"] == 3 and resolved["algorithm"]["lr"] == 3e-4
    bad = _run("-m", "agilerl", "show", str(MANIFEST), "training.pop_size=0")
    assert bad.returncode == 1 and "training.pop_size=0" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_schema_write_saves_the_bundle_and_prints_the_modeline(tmp_path):
    target = tmp_path / "agilerl.schema.json"
    done = _run("-m", "agilerl", "schema", "--write", str(target))
    assert done.returncode == 0, done.stderr
    bundle = REPO / "agilerl" / "schemas" / "manifest.schema.json"
    assert json.loads(target.read_text()) == json.loads(bundle.read_text())
    assert done.stdout == f"# yaml-language-server: $schema={target.resolve()}\n"
    into_folder = _run("-m", "agilerl", "schema", "--algorithm", "PPO", "--write", str(tmp_path))
    assert into_folder.returncode == 0, into_folder.stderr
    assert json.loads((tmp_path / "manifest.schema.json").read_text())["title"]
    nowhere = tmp_path / "missing" / "schema.json"
    bad = _run("-m", "agilerl", "schema", "--write", str(nowhere))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert f"cannot write {nowhere}" in bad.stderr


def _complete(shell: str, *words: str) -> list[str]:
    """What ``_agilerl`` offers for the last of ``words`` (bash, the script sourced)."""
    script = (f"source <({sys.executable} -m agilerl completion {shell}); "
              f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
              f"COMP_CWORD={len(words) - 1}; _agilerl; echo ${{COMPREPLY[@]}}")
    done = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout.split()


def test_bash_completion_completes_commands_options_and_choices():
    assert _complete("bash", "agilerl", "tr") == ["train"]
    assert _complete("bash", "agilerl", "train", "x.yaml", "--se") == ["--seed"]
    assert _complete("bash", "agilerl", "train", "--backend", "r") == ["ray"]
    assert _complete("bash", "agilerl", "completion", "") == ["bash", "zsh"]
    assert "completion" in _complete("bash", "agilerl", "")


def test_completion_refuses_an_unknown_shell():
    done = _run("-m", "agilerl", "completion", "fish")
    assert done.returncode == 2 and "invalid choice: 'fish'" in done.stderr
    assert "usage: agilerl completion" in done.stderr and "Traceback" not in done.stderr


def test_zsh_completion_uses_bashcompinit():
    done = _run("-m", "agilerl", "completion", "zsh")
    assert done.returncode == 0
    assert done.stdout.startswith("autoload -U +X bashcompinit && bashcompinit\n")
    assert "complete -o filenames -F _agilerl agilerl" in done.stdout
