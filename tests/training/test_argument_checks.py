"""Arguments a user can get wrong, answered by name: wrong types and out-of-range values to
``LocalTrainer``/``train()``, ``--torch-threads`` beyond the cores, ``--ray-address`` without
the ray backend, an elite path that is a folder, a resume manifest that writes the default
network out, and a resume whose checkpoint holds no replay buffer."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agilerl.core.errors import ArgumentError
from agilerl.training.resume import ResumeWithoutReplayBufferWarning
from agilerl.training.trainer import LocalTrainer

from .conftest import TINY_DQN

REPO = Path(__file__).resolve().parents[2]
MANIFEST = {**TINY_DQN, "training": {**TINY_DQN["training"], "pop_size": 2,
                                     "max_steps": 200, "evo_steps": 100}}


def _trainer(**kwargs) -> LocalTrainer:
    return LocalTrainer.from_manifest(manifest=copy.deepcopy(MANIFEST), seed=1, **kwargs)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"training": "abc"}, "training: expected a TrainingSpec"),
    ({"mutation": "x"}, "mutation: expected a MutationSpec"),
    ({"selection_strategy": 3}, "selection_strategy: expected"),
    ({"replay_buffer": [1]}, "replay_buffer: expected a ReplayBufferSpec"),
    ({"seed": 1.5}, "seed=1.5: expected a whole number"),
    ({"seed": "7"}, "seed='7'"),
    ({"hpo": "yes"}, "hpo='yes'"),
    ({"resume_from_checkpoint": 5}, "resume_from_checkpoint=5: expected a path"),
])
def test_wrong_constructor_arguments_are_named(kwargs, needle):
    with pytest.raises((TypeError, ValueError), match=needle.replace("(", r"\(")) as caught:
        LocalTrainer("DQN", "CartPole-v1", **kwargs)
    assert not isinstance(caught.value, AttributeError | FileNotFoundError | RecursionError)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"verbose": "yes"}, "verbose='yes'"),
    ({"save_elite": "no"}, "save_elite='no'"),
    ({"save_elite": True, "elite_path": 5}, "elite_path=5: expected a path"),
    ({"checkpoint_steps": "10"}, "checkpoint_steps='10'"),
    ({"checkpoint_steps": -1}, "checkpoint_steps=-1: must be at least 0"),
    ({"run_dir": 5}, "run_dir=5"),
    ({"torch_threads": "4"}, "torch_threads='4'"),
    ({"torch_threads": 0}, "torch_threads=0: must be at least 1"),
    ({"torch_threads": 10_000}, "torch_threads=10000: must be at most"),
    ({"num_workers": "2"}, "num_workers='2'"),
    ({"wandb_kwargs": "x"}, "wandb_kwargs='x'"),
    ({"overwrite_checkpoints": "x"}, "overwrite_checkpoints='x'"),
    ({"checkpoint_replay_buffer": "no"}, "checkpoint_replay_buffer='no'"),
    ({"ray_address": "auto"}, "needs the ray backend"),
])
def test_wrong_train_arguments_are_named_before_anything_runs(kwargs, needle, tmp_path):
    trainer = _trainer()
    try:
        with pytest.raises(ArgumentError, match=needle):
            trainer.train(**{"verbose": False, **kwargs}, checkpoint_path=tmp_path / "ck")
    finally:
        trainer.close()
    assert not (tmp_path / "ck").exists()
    assert all(not agent.steps or agent.steps[-1] == 0 for agent in trainer.population)


def _cli(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    path = cwd / "m.yaml"
    path.write_text(yaml.safe_dump(MANIFEST))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "agilerl.train", str(path), "--no-verbose",
                           "--run-dir", str(cwd / "run"), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("args", "needle"), [
    (("--torch-threads", 10_000), "torch_threads=10000: must be at most"),
    (("--ray-address", "auto"), "needs the ray backend"),
], ids=["torch-threads", "ray-address"])
def test_cli_refuses_options_it_would_misuse(tmp_path, args, needle):
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr and "Traceback" not in done.stderr


def test_elite_path_that_is_a_folder_holds_the_elite(tmp_path):
    folder = tmp_path / "elites"
    folder.mkdir()
    trainer = _trainer()
    trainer.train(verbose=False, save_elite=True, elite_path=folder)
    trainer.close()
    assert trainer.last_elite_path == folder / "elite.pt" and (folder / "elite.pt").is_file()
    assert not (tmp_path / "elites.pt").exists()


def _first_checkpoint(manifest: dict, tmp_path: Path, **kwargs) -> Path:
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(manifest), seed=1)
    trainer.train(verbose=False, checkpoint_steps=100, checkpoint_path=tmp_path / "ck",
                  **kwargs)
    trainer.close()
    return sorted((tmp_path / "ck").iterdir())[0]


def test_resume_accepts_a_manifest_that_writes_the_default_network_out(tmp_path):
    from agilerl.checkpoint import ResumeMismatchError

    implicit = {k: v for k, v in MANIFEST.items() if k != "network"}
    checkpoint = _first_checkpoint(implicit, tmp_path)
    explicit = {**implicit, "network": {"latent_dim": 32, "encoder_config": {
        "hidden_size": [64, 64]}, "head_config": {"hidden_size": [64]}}}  # DQN's default
    LocalTrainer.from_manifest(manifest=explicit, resume_from_checkpoint=checkpoint).close()
    other = {**implicit, "network": {"latent_dim": 32, "encoder_config": {
        "hidden_size": [48]}, "head_config": {"hidden_size": [64]}}}
    with pytest.raises(ResumeMismatchError, match="hidden_size"):
        LocalTrainer.from_manifest(manifest=other, resume_from_checkpoint=checkpoint)


def test_resume_without_the_replay_buffer_says_it_is_not_exact(tmp_path):
    checkpoint = _first_checkpoint(MANIFEST, tmp_path, checkpoint_replay_buffer=False)
    with pytest.warns(ResumeWithoutReplayBufferWarning, match="empty replay buffer"):
        trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(MANIFEST),
                                             resume_from_checkpoint=checkpoint)
    trainer.close()
