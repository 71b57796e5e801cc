"""Issue 23 item 3: the progress line, the summary, ``metrics.csv`` and the checkpoint
names tell the same counts (CLI runs in subprocesses, verbose, output not a terminal)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs" / "training"


def _train(manifest: Path, run_dir: Path, *args: str) -> str:
    env = dict(os.environ, WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(manifest), "--seed", "1", "--workers", "1",
         "--run-dir", str(run_dir), *args],
        cwd=run_dir.parent, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _check_agreement(stdout: str, run_dir: Path, *, generations: int) -> list[dict[str, str]]:
    """Every count shown agrees; returns the metrics.csv rows."""
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    last_step = int(rows[-1]["train/global_step"])
    progress = re.findall(r"^steps ([\d,]+)\b", stdout, re.MULTILINE)
    assert int(progress[-1].replace(",", "")) == last_step
    assert f"env steps: {last_step:,}\n" in stdout
    assert f"generations: {generations}\n" in stdout
    # generations are numbered from 1, in the CSV, the progress line and checkpoint names
    assert [int(r["train/generation"]) for r in rows] == list(range(1, generations + 1))
    assert re.findall(r"\| gen (\d+) \|", stdout)[-1] == str(generations)
    # checkpoint folders are named by generation and the population's steps of that row
    names = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert names == [f"gen{int(r['train/generation']):05d}-step{int(r['train/global_step']):010d}"
                     for r in rows]
    for name, row in zip(names, rows, strict=True):
        index = json.loads((run_dir / "checkpoints" / name / "index.json").read_text())
        assert index["summary"]["global_step"] == int(row["train/global_step"])
    return rows


def test_ppo_whole_rollouts_past_the_budget_agree(tmp_path):
    run_dir = tmp_path / "ppo"
    # learn_step 1,004 (not a multiple of 8 envs: rollouts of 126 vector steps, 1,008 env
    # steps; pinned, so that no mutation changes it) and evo_steps 1,500: every member call
    # trains whole rollouts and passes its share, the total passes the budget.
    stdout = _train(CONFIGS / "ppo.yaml", run_dir, "--checkpoint-steps", "1",
                    "training.max_steps=3000", "training.evo_steps=1500",
                    "training.pop_size=2", "algorithm.learn_step=1004",
                    "mutation.rl_hp_selection.learn_step.min=1004",
                    "mutation.rl_hp_selection.learn_step.max=1004")
    rows = _check_agreement(stdout, run_dir, generations=2)
    last = int(rows[-1]["train/global_step"])
    assert last > 6000  # past the budget, and the line says so instead of "N/6,000"
    assert f"steps {last:,} (budget 6,000 = 3,000 x 2 agents, done)" in stdout


def test_dqn_uneven_split_agrees_and_the_remainder_is_trained(tmp_path):
    run_dir = tmp_path / "dqn"
    # 16 envs: 500 steps are 31 vector steps (496), so two generations leave 8 steps.
    stdout = _train(CONFIGS / "dqn.yaml", run_dir, "--checkpoint-steps", "1",
                    "training.max_steps=1000", "training.evo_steps=500",
                    "training.pop_size=2", "environment.num_envs=16",
                    "training.learning_delay=0", "algorithm.batch_size=32")
    _check_agreement(stdout, run_dir, generations=3)


def test_a_resumed_run_continues_the_counts(tmp_path):
    first = tmp_path / "first"
    _train(CONFIGS / "dqn.yaml", first, "--checkpoint-steps", "1",
           "training.max_steps=512", "training.evo_steps=256", "training.pop_size=2",
           "training.learning_delay=0", "algorithm.batch_size=32")
    resumed = tmp_path / "resumed"
    stdout = _train(CONFIGS / "dqn.yaml", resumed, "--checkpoint-steps", "1",
                    "--resume-from-checkpoint", str(first / "checkpoints"),
                    "training.max_steps=1024", "training.evo_steps=256",
                    "training.pop_size=2", "training.learning_delay=0",
                    "algorithm.batch_size=32")
    # the resumed run's folder has its own metrics.csv: generations 3 and 4 of the run
    rows = list(csv.DictReader((resumed / "metrics.csv").open()))
    assert [int(r["train/generation"]) for r in rows] == [3, 4]
    assert int(rows[-1]["train/global_step"]) == 2048
    assert "env steps: 2,048\n" in stdout and "generations: 4\n" in stdout
    assert sorted(p.name for p in (resumed / "checkpoints").iterdir()) == [
        "gen00003-step0000001536", "gen00004-step0000002048"]


@pytest.mark.parametrize(("done_before", "expected"), [(0, "(100 steps/s)"),
                                                      (900, "(10 steps/s)")])
def test_summary_rate_counts_only_this_runs_steps(done_before, expected):
    from agilerl.logging import summary_rows

    rows = dict(summary_rows(best_fitness=1.0, total_steps=1000, wall_time_s=10.0,
                             steps_this_run=1000 - done_before))
    assert rows["env steps"] == "1,000"
    assert rows["wall time"].endswith(expected)


def test_offline_counts_are_labelled_updates():
    from agilerl.logging import summary_rows
    from agilerl.logging.progress import ProgressState

    rows = dict(summary_rows(best_fitness=1.0, total_steps=200, wall_time_s=2.0,
                             unit="updates"))
    assert rows["updates"] == "200" and rows["wall time"].endswith("(100 updates/s)")
    line = ProgressState(total_steps=400, agents=2, steps=200, unit="updates").line()
    assert line.startswith("updates 200/400 (200 x 2 agents, 50%) | - updates/s")


def test_offline_cqn_run_counts_updates_not_env_steps(tmp_path):
    stdout = _train(CONFIGS / "cqn.yaml", tmp_path / "cqn", "training.max_steps=100",
                    "training.evo_steps=50", "training.pop_size=2")
    assert "env steps" not in stdout
    assert re.search(r"^updates 200/200 \(100 x 2 agents, 100%\) \| [\d,]+ updates/s", stdout,
                     re.MULTILINE)
    assert "\n  updates: 200\n" in stdout and "budget: 100 updates x 2 agents" in stdout
