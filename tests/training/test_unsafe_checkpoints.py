"""Checkpoint and agent files are loaded as plain data: a crafted pickle handed to
``--resume-from-checkpoint``, ``LocalTrainer(resume_from_checkpoint=...)`` or ``Agent.load``
is refused with a message naming the file, and the code it carries never runs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from agilerl.checkpoint import CheckpointError
from agilerl.training.trainer import LocalTrainer

from .conftest import TINY_DQN

REPO = Path(__file__).resolve().parents[2]
MANIFEST = {**TINY_DQN, "training": {**TINY_DQN["training"], "pop_size": 2,
                                     "max_steps": 400, "evo_steps": 200}}


class _RunsCode:
    """Pickles to a call of ``os.system``: what an attacker puts in a checkpoint file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _plant(path: Path, marker: Path) -> None:
    """Replace ``path`` with a code-running pickle; fix its entry in index.json, as an
    attacker who can write the folder would."""
    torch.save({"algo": "DQN", "payload": _RunsCode(marker)}, path)
    index_path = path.parent / "index.json"
    if index_path.is_file():
        index = json.loads(index_path.read_text())
        index["files"][path.name] = {"size": path.stat().st_size,
                                     "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        index_path.write_text(json.dumps(index))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ck")
    trainer = LocalTrainer.from_manifest(manifest=MANIFEST, seed=1)
    trainer.train(verbose=False, checkpoint_steps=200, checkpoint_path=root / "ck",
                  save_elite=True, elite_path=root / "elite.pt")
    trainer.close()
    return sorted((root / "ck").iterdir())[0]


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, tmp_path / folder.name))


@pytest.mark.parametrize("name", ["member_0.pt", "trainer.pt", "replay_buffer.pt"])
def test_crafted_checkpoint_file_is_refused_by_the_cli(checkpoint, tmp_path, name):
    folder, marker = _copy(checkpoint, tmp_path), tmp_path / "pwned"
    _plant(folder / name, marker)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(manifest), "--no-verbose",
         "--run-dir", str(tmp_path / "run"), "--resume-from-checkpoint", str(folder)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert not marker.exists(), "the checkpoint's code ran"
    assert done.returncode == 2, done.stderr
    assert f"checkpoint {folder}: {name!r} is refused" in done.stderr
    assert "posix.system" in done.stderr  # what the file tried to call
    assert "Traceback" not in done.stderr and "weights_only" not in done.stderr


def test_crafted_agent_file_is_refused(checkpoint, tmp_path):
    from agilerl.algorithms import DQN

    agent_file, marker = tmp_path / "elite.pt", tmp_path / "pwned"
    _plant(agent_file, marker)
    with pytest.raises(CheckpointError, match="elite.pt is refused"):
        LocalTrainer.from_manifest(manifest=MANIFEST, resume_from_checkpoint=agent_file)
    with pytest.raises(CheckpointError, match="elite.pt is refused"):
        DQN.load(agent_file)
    assert not marker.exists()


def test_saved_files_hold_plain_data_and_resume(checkpoint):
    """Every file agilerl wrote loads with ``weights_only``; the elite still acts."""
    from agilerl.algorithms import DQN
    from agilerl.checkpoint.plain import numpy_safe_globals

    for path in [*checkpoint.glob("*.pt"), checkpoint.parent.parent / "elite.pt"]:
        with torch.serialization.safe_globals(numpy_safe_globals()):
            torch.load(path, weights_only=True)
    agent = DQN.load(checkpoint.parent.parent / "elite.pt")
    assert agent.observation_space.shape == (4,) and agent.action_space.n == 2
    LocalTrainer.from_manifest(manifest=MANIFEST, resume_from_checkpoint=checkpoint).close()


def test_checkpoint_of_format_1_is_refused_naming_why(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path)
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**index, "version": 1}))
    with pytest.raises(CheckpointError, match="format version 1.*pickle Python objects"):
        LocalTrainer.from_manifest(manifest=MANIFEST, resume_from_checkpoint=folder)


def test_state_that_is_not_plain_data_is_not_written(tmp_path):
    from agilerl.checkpoint.folder import save_torch_atomically

    with pytest.raises(TypeError, match=r"state\['hook'\] is a builtins.function"):
        save_torch_atomically({"hook": lambda: 0}, tmp_path / "x.pt")
    assert not (tmp_path / "x.pt").exists()
