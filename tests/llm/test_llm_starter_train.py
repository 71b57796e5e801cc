"""The docs/llm.md walkthrough runs as written: ``agilerl llm tiny-model DIR``, then
``agilerl train configs/training/llm/<name>.yaml`` with the overrides it prints, in a
subprocess with nothing downloadable (``HF_HUB_OFFLINE=1``). Each takes 5-10 s at load 3 on
a 2-core machine (6-11 CPU-seconds, mostly imports); the multi-turn game, whose episodes of
up to three turns are the slowest on a busy machine (about 4 minutes at load 10), is
``slow``; a fast test below checks that its manifest builds its game."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agilerl.llm.starter import walkthrough

REPO = Path(__file__).resolve().parents[2]
FAST = ("grpo", "dpo", "sft")
SLOW = ("grpo_multiturn",)


def _agilerl(args: list[str], cwd: Path, runs: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               WANDB_MODE="offline", AGILERL_RUNS_DIR=str(runs))
    return subprocess.run([sys.executable, "-m", "agilerl.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=280)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starter folder, written by the command in a subprocess."""
    base = tmp_path_factory.mktemp("walk")
    done = _agilerl(["llm", "tiny-model", str(base / "tiny")], REPO, base / "runs")
    assert done.returncode == 0, done.stderr
    assert "agilerl train configs/training/llm/grpo.yaml" in done.stdout
    return base / "tiny"


@pytest.mark.parametrize("name", [*FAST, *(pytest.param(n, marks=pytest.mark.slow)
                                           for n in SLOW)])
def test_a_walkthrough_command_trains_to_completion(name: str, folder: Path,
                                                    tmp_path: Path) -> None:
    command, = walkthrough(folder, (name,))
    args = shlex.split(command)[1:]  # drop the console script's name
    done = _agilerl([*args, "--run-dir", str(tmp_path / "run"), "--save-elite"], REPO,
                    tmp_path / "runs")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "status: finished" in done.stdout
    assert (tmp_path / "run" / "elite_adapter").is_dir()


def test_the_multiturn_manifest_builds_the_built_in_game_on_the_tiny_model(
        folder: Path) -> None:
    import yaml

    from agilerl.training.trainer import LocalTrainer

    manifest = yaml.safe_load((REPO / "configs/training/llm/grpo_multiturn.yaml").read_text())
    manifest["network"]["pretrained_model_name_or_path"] = str(folder / "model")
    trainer = LocalTrainer.from_manifest(manifest, seed=0)
    assert trainer.env.name == "agilerl.llm.toy_game:make_guess_letter"
    assert trainer.env.max_turns == 3  # env_config.max_turns, read from the game


def test_the_multiturn_manifest_plays_a_gem_game_with_the_overrides_its_header_names(
        folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("gem", reason="GEM games need gem-llm")
    header = (REPO / "configs/training/llm/grpo_multiturn.yaml").read_text()
    overrides = next(line[1:].split() for line in header.splitlines()
                     if "environment.env_name=" in line)
    done = _agilerl(["train", "configs/training/llm/grpo_multiturn.yaml", *overrides,
                     f"network.pretrained_model_name_or_path={folder / 'model'}",
                     "training.max_steps=1", "training.evo_steps=1", "training.pop_size=1",
                     "--run-dir", str(tmp_path / "run")], REPO, tmp_path / "runs")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "status: finished" in done.stdout
    assert "env_name: game:GuessTheNumber-v0-easy" in (tmp_path / "run" / "manifest.yaml").read_text()
    header_row, first = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[:2]
    turns = dict(zip(header_row.split(","), first.split(","), strict=False))["train/mean_turns"]
    assert float(turns) >= 1.0  # the game was played (its opening fits the context)
