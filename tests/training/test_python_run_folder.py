"""Issue 23 item 5: ``train()`` from Python writes the run folder ``agilerl train`` writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agilerl import LocalTrainer
from agilerl.core.errors import ArgumentError
from agilerl.models import TrainingSpec

TINY = {"max_steps": 64, "evo_steps": 32, "pop_size": 2, "eval_steps": 20}


def _trainer() -> LocalTrainer:
    return LocalTrainer("DQN", "CartPole-v1", seed=0, training=TrainingSpec(**TINY))


def test_train_writes_the_run_folder_with_tensorboard_inside(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGILERL_RUNS_DIR", raising=False)
    _trainer().train(verbose=True, tensorboard=True)
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("CartPole-v1-DQN-")
    assert "train/global_step" in (run / "metrics.csv").read_text().splitlines()[0]
    assert (run / "manifest.yaml").is_file()
    (logs,) = (run / "tensorboard").iterdir()
    assert any(logs.iterdir())
    out = capsys.readouterr()
    assert f"tensorboard --logdir {Path('runs') / run.name / 'tensorboard' / logs.name}" \
        in out.out + out.err
    assert "pip install tensorboard" in out.out + out.err
    _trainer().train(verbose=False)  # a second run in the same second gets its own folder
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_automatic_run_folders_go_under_agilerl_runs_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGILERL_RUNS_DIR", str(tmp_path / "elsewhere"))
    _trainer().train(verbose=False)
    (run,) = (tmp_path / "elsewhere").iterdir()
    assert (run / "metrics.csv").is_file()
    assert not (tmp_path / "runs").exists()


def test_run_dir_false_writes_nothing_and_refuses_outputs_that_need_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGILERL_RUNS_DIR", raising=False)
    _trainer().train(verbose=False, run_dir=False)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ArgumentError, match="run_dir=False .* elite_path"):
        _trainer().train(verbose=False, run_dir=False, save_elite=True)
    with pytest.raises(ArgumentError, match="run_dir=False .* checkpoint_path"):
        _trainer().train(verbose=False, run_dir=False, checkpoint_steps=32)
    with pytest.raises(ArgumentError, match="run_dir=True"):
        _trainer().train(verbose=False, run_dir=True)
