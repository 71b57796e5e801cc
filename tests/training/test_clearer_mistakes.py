"""Issue 23 item 6: mistakes a new user makes get messages that say what to do."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL = """\
algorithm: {name: DQN}
environment: {name: CartPole-v1}
training: {max_steps: 100, evo_steps: 50, pop_size: 2}
replay_buffer: {max_size: 1000}
"""


def _cli(*args: object, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-m", "agilerl.train", *map(str, args)], cwd=cwd,
                          env=full, capture_output=True, text=True, timeout=120)


def test_pettingzoo_env_with_a_single_agent_algorithm_names_the_multi_agent_ones(tmp_path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(SMALL)
    done = _cli(manifest, "environment.name=mpe2.simple_speaker_listener_v4", cwd=tmp_path)
    assert done.returncode == 1
    assert "environment.name" in done.stderr and "PettingZoo" in done.stderr
    assert "IPPO, MADDPG, MATD3" in done.stderr and "Traceback" not in done.stderr
    assert "not a registered Gymnasium id" not in done.stderr


def test_pettingzoo_env_from_python_is_a_manifest_error_not_name_not_found():
    from agilerl import LocalTrainer
    from agilerl.models import ManifestError

    with pytest.raises(ManifestError, match=r"(?s)environment\.name.*PettingZoo.*IPPO"):
        LocalTrainer("DQN", "mpe2.simple_speaker_listener_v4")


def test_left_out_mutation_kinds_are_zero_when_the_given_ones_sum_to_one():
    from agilerl.models import TrainingManifest

    data = {"algorithm": {"name": "DQN"}, "environment": {"name": "CartPole-v1"},
            "mutation": {"probabilities": {"no_mut": 0.4, "arch_mut": 0.2, "params_mut": 0.2,
                                           "act_mut": 0.2}},
            "selection_strategy": {"tournament_size": 2}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "sum to 1.2" warning
        manifest = TrainingManifest.get_validated(data, mode="python")
    assert manifest.mutation.probabilities.rl_hp_mut == 0.0
    data["mutation"]["probabilities"] = {"no_mut": 0.5}  # given ones below 1: defaults stay
    manifest = TrainingManifest.get_validated(data, mode="python")
    assert manifest.mutation.probabilities.rl_hp_mut == 0.2


def test_a_manifest_warning_is_shown_once_from_python(tmp_path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(SMALL + "mutation:\n  probabilities: {no_mut: 0.4, arch_mut: 0.2, "
                        "params_mut: 0.2, act_mut: 0.2, rl_hp_mut: 0.2}\n"
                        "selection_strategy: {tournament_size: 2}\n")
    code = ("from agilerl import LocalTrainer\n"
            f"t = LocalTrainer.from_manifest({str(manifest)!r})\n"
            "t.train(verbose=False, torch_threads=1, num_workers=1)\n")
    done = subprocess.run([sys.executable, "-W", "always", "-c", code], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("sum to 1.2") == 1


def test_a_run_that_fails_before_training_leaves_no_run_folder(tmp_path):
    manifest = tmp_path / "m.yaml"
    manifest.write_text(SMALL)
    done = _cli(manifest, "--wb", "--run-dir", tmp_path / "run", cwd=tmp_path,
                WANDB_API_KEY="", WANDB_MODE="online")
    assert done.returncode == 2 and "API key" in done.stderr
    assert not (tmp_path / "run").exists()
