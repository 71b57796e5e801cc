"""The Python API answers like the CLI: names, missing arguments, a second ``train()``,
Ctrl-C, resume rules (no silent rollback, torn writes cleaned up, what a resumed run records).
"""

from __future__ import annotations

import os
import signal
import warnings

import pytest
import yaml

from agilerl.checkpoint import (
    CheckpointError,
    CheckpointFallbackWarning,
    find_checkpoint,
    read_checkpoint,
    remove_torn_writes,
)
from agilerl.core.errors import TrainingInterrupted
from agilerl.models import ManifestError, UnknownAlgorithmError
from agilerl.training.trainer import LocalTrainer

from .conftest import TINY_DQN


def _tiny(**training) -> dict:
    return dict(TINY_DQN, training={**TINY_DQN["training"], "pop_size": 2, **training})


@pytest.mark.parametrize("name", ["dqn", "Dqn", "DQNN"])
def test_unknown_algorithm_name_suggests_the_registered_one(name):
    with pytest.raises(UnknownAlgorithmError, match="did you mean 'DQN'") as info:
        LocalTrainer(algorithm=name, environment="CartPole-v1")
    assert isinstance(info.value, KeyError) and isinstance(info.value, ManifestError)
    assert info.value.paths == ["algorithm"]


@pytest.mark.parametrize("missing", ["algorithm", "environment"])
def test_missing_algorithm_or_environment_is_a_manifest_error(missing):
    kwargs = {"algorithm": "DQN", "environment": "CartPole-v1", missing: None}
    with pytest.raises(ManifestError, match=f"{missing}: is required") as info:
        LocalTrainer(**kwargs)
    assert info.value.paths == [missing]


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [({"algorithm": 123, "environment": "CartPole-v1"}, "algorithm"),
     ({"algorithm": "DQN", "environment": 42}, "environment")],
)
def test_arguments_of_the_wrong_kind_are_manifest_errors(kwargs, path):
    with pytest.raises(ManifestError, match=f"{path}: expected") as info:
        LocalTrainer(**kwargs)
    assert info.value.paths == [path]


def test_environment_and_training_mappings_are_accepted():
    trainer = LocalTrainer(algorithm="DQN", environment={"name": "CartPole-v1", "num_envs": 2},
                           training={"pop_size": 2, "max_steps": 100})
    assert trainer.env.num_envs == 2 and len(trainer.population) == 2
    trainer.close()


def test_environment_the_algorithm_cannot_act_in():
    from agilerl.core.errors import UnsupportedSettingError

    with pytest.raises(UnsupportedSettingError, match="'Pendulum-v1': DQN needs a Discrete"):
        LocalTrainer(algorithm="DQN", environment="Pendulum-v1")


def test_unregistered_environment_id_from_python():
    from agilerl.core.errors import EnvironmentSetupError

    with pytest.raises(EnvironmentSetupError, match="'NoSuchEnv-v0'.*doesn't exist"):
        LocalTrainer(algorithm="DQN", environment="NoSuchEnv-v0")


def test_second_train_continues_where_the_first_stopped():
    trainer = LocalTrainer.from_manifest(_tiny(max_steps=400), seed=1)
    _, first = trainer.train(verbose=False)
    steps = [agent.steps[-1] for agent in trainer.population]
    assert first and all(s >= 400 for s in steps)
    population, second = trainer.train(verbose=False)
    assert len(second) == len(population) == 2
    after = [agent.steps[-1] for agent in population]
    assert all(a >= 800 for a in after)  # another max_steps per member
    trainer.close()


def _interrupt_after_first_member(monkeypatch):
    from agilerl.training.session import TrainSession

    original = TrainSession.on_member_trained
    sent = []

    def hook(self, state, member, report):
        original(self, state, member, report)
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(TrainSession, "on_member_trained", hook)


def test_ctrl_c_in_python_names_the_resume_call(monkeypatch, tmp_path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(_tiny(max_steps=800), sort_keys=False))
    trainer = LocalTrainer.from_manifest(manifest, seed=1)
    _interrupt_after_first_member(monkeypatch)
    with pytest.raises(TrainingInterrupted) as info:
        trainer.train(verbose=False, run_dir=tmp_path / "run")
    message = str(info.value)
    checkpoint = info.value.checkpoint
    assert read_checkpoint(checkpoint).pop_size == 2
    assert (f"LocalTrainer.from_manifest({str(manifest)!r}, "
            f"resume_from_checkpoint={str(checkpoint)!r})") in message
    assert "SIGINT" in message
    monkeypatch.undo()
    # calling train() again on the same trainer finishes the run
    population, fitnesses = trainer.train(verbose=False)
    assert len(fitnesses) == 2
    trainer.close()


def _checkpoints(tmp_path, **training):
    trainer = LocalTrainer.from_manifest(_tiny(**training), seed=1)
    trainer.train(verbose=False, checkpoint_steps=200, checkpoint_path=tmp_path / "ck")
    trainer.close()
    return sorted((tmp_path / "ck").iterdir())


def test_unfinished_newest_checkpoint_falls_back_loudly(tmp_path):
    older, newer = _checkpoints(tmp_path, max_steps=400)
    (newer / "index.json").unlink()  # its writing was killed before the index
    with pytest.warns(CheckpointFallbackWarning) as caught:
        found = find_checkpoint(tmp_path / "ck")
    assert found.path == older
    message = str(caught[0].message)
    assert str(newer) in message and str(older) in message


def test_damaged_newest_checkpoint_is_refused(tmp_path):
    older, newer = _checkpoints(tmp_path, max_steps=400)
    (newer / "index.json").write_text("[]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CheckpointError, match="roll the run back") as info:
            find_checkpoint(tmp_path / "ck")
    assert str(older) in str(info.value)


def test_torn_writes_are_cleaned_up(tmp_path):
    older, newer = _checkpoints(tmp_path, max_steps=400)
    torn = tmp_path / "ck" / "gen00009-step0000009999"
    torn.mkdir()
    (torn / "member_0.pt").write_bytes(b"half")
    dead = 2**22 + 12345  # above the kernel's default pid_max: no such process
    (torn / f".member_1.pt.tmp-{dead}").write_bytes(b"half")
    (newer / f".trainer.pt.tmp-{dead}").write_bytes(b"stale")
    live = tmp_path / "ck" / "being-written"  # another live process is writing this one
    live.mkdir()
    (live / f".member_0.pt.tmp-{os.getppid()}").write_bytes(b"in progress")
    assert remove_torn_writes(tmp_path / "ck") == [torn]
    assert not torn.exists() and live.exists()
    assert not list(newer.glob(".*tmp*"))
    assert read_checkpoint(newer).pop_size == 2


def test_training_removes_torn_writes_it_finds(tmp_path):
    root = tmp_path / "ck"
    torn = root / "gen00000-step0000000100"
    torn.mkdir(parents=True)
    (torn / f".member_0.pt.tmp-{2**22 + 99}").write_bytes(b"half")
    trainer = LocalTrainer.from_manifest(_tiny(max_steps=200), seed=1)
    trainer.train(verbose=False, checkpoint_steps=200, checkpoint_path=root)
    trainer.close()
    assert not torn.exists()


def test_resumed_run_manifest_records_what_runs(tmp_path):
    _, newer = _checkpoints(tmp_path, max_steps=400)
    manifest = _tiny(max_steps=600)
    manifest["algorithm"] = {**manifest["algorithm"], "lr": 0.5}  # members keep their own
    trainer = LocalTrainer.from_manifest(manifest, resume_from_checkpoint=newer, seed=7)
    trainer.train(verbose=False, run_dir=tmp_path / "resumed")
    trainer.close()
    text = (tmp_path / "resumed" / "manifest.yaml").read_text()
    assert f"resumed from {newer}" in text
    assert "seed 1" in text.splitlines()[0]  # the checkpoint's seed is the one that runs
    recorded = yaml.safe_load(text)
    assert recorded["algorithm"]["lr"] == TINY_DQN["algorithm"]["lr"]
    assert recorded["training"]["max_steps"] == 600


@pytest.mark.filterwarnings("ignore:checkpoint_path is set without checkpoint_steps")
def test_stopping_again_at_the_same_point_never_rewrites_the_resumed_checkpoint(
        monkeypatch, tmp_path):
    from agilerl.training.session import TrainSession

    trainer = LocalTrainer.from_manifest(_tiny(max_steps=800), seed=1)
    _interrupt_after_first_member(monkeypatch)
    with pytest.raises(TrainingInterrupted) as first:
        trainer.train(verbose=False, checkpoint_path=tmp_path / "ck")
    trainer.close()
    index = (first.value.checkpoint / "index.json").read_text()
    # resume, and stop before training anything: the same generation, step and member
    monkeypatch.setattr(TrainSession, "interrupt_requested", lambda self: True)
    resumed = LocalTrainer.from_manifest(_tiny(max_steps=800),
                                         resume_from_checkpoint=first.value.checkpoint)
    with pytest.raises(TrainingInterrupted) as second:
        resumed.train(verbose=False, checkpoint_path=tmp_path / "ck")
    resumed.close()
    assert second.value.checkpoint != first.value.checkpoint
    assert second.value.checkpoint.name == first.value.checkpoint.name + "-2"
    assert (first.value.checkpoint / "index.json").read_text() == index


def test_cleanup_leaves_files_that_are_not_checkpoint_temp_files(tmp_path):
    dead = 2**22 + 7
    other = tmp_path / "notes"
    other.mkdir()
    (other / f".draft.txt.tmp-{dead}").write_text("mine")  # not a checkpoint's temp file
    (other / "member_0.pt").write_bytes(b"x")
    assert remove_torn_writes(tmp_path) == []
    assert (other / f".draft.txt.tmp-{dead}").exists()


def test_resuming_a_finished_run_without_more_budget_says_so(tmp_path):
    _, newer = _checkpoints(tmp_path, max_steps=400)
    trainer = LocalTrainer.from_manifest(_tiny(max_steps=400), resume_from_checkpoint=newer)
    with pytest.warns(UserWarning, match="raise training.max_steps to continue"):
        _, fitnesses = trainer.train(verbose=False)
    assert len(fitnesses) == 2  # the checkpoint's last evaluation, not []
    trainer.close()
