"""Runs on image and composite observations: same seed twice gives the same run, and a
run resumed from a checkpoint (replay memory of structured observations included) equals
the uninterrupted one."""

from __future__ import annotations

import pytest

from .conftest import manifest_trainer, run_and_resume, runs_with_same_seed

CNN = {"channel_size": [8], "kernel_size": [4], "stride_size": [4], "min_channel_size": 4}
MUTATION = {"probabilities": {"no_mut": 0.2, "arch_mut": 0.4, "new_layer": 0.5,
                              "params_mut": 0.2, "act_mut": 0.0, "rl_hp_mut": 0.2},
            "rl_hp_selection": {"lr": {"min": 1e-4, "max": 1e-2}}, "rand_seed": 1}
PPO_CNN = {
    "algorithm": {"name": "PPO", "batch_size": 32, "lr": 1e-3, "learn_step": 64,
                  "update_epochs": 2},
    "environment": {"name": "DummyImage-v0", "num_envs": 4},
    "network": {"latent_dim": 16, "arch": "cnn", "encoder_config": CNN,
                "head_config": {"hidden_size": [16]}},
    "mutation": MUTATION,
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "training": {"max_steps": 384, "evo_steps": 128, "pop_size": 2, "eval_steps": 20},
}
DQN_MULTI = {
    "algorithm": {"name": "DQN", "batch_size": 16, "lr": 1e-3, "learn_step": 4},
    "environment": {"name": "Blackjack-v1", "num_envs": 4},
    "network": {"latent_dim": 16, "arch": "multiinput",
                "encoder_config": {"mlp_config": {"hidden_size": [16]}},
                "head_config": {"hidden_size": [16]}},
    "mutation": MUTATION,
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "replay_buffer": {"max_size": 2000},
    "training": {"max_steps": 600, "evo_steps": 200, "pop_size": 2, "eval_steps": 20},
}
MANIFESTS = {"ppo-cnn": PPO_CNN, "dqn-multiinput": DQN_MULTI}


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_same_seed_same_run(name):
    runs_with_same_seed(manifest_trainer(MANIFESTS[name], seed=4))


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_resume_from_checkpoint_is_exact(name, tmp_path):
    manifest = MANIFESTS[name]
    run = run_and_resume(manifest_trainer(manifest, seed=5), tmp_path,
                         manifest["training"]["evo_steps"])
    archs = {str(a.networks[n].architecture()) for a in run.full_pop for n in a.networks}
    assert all(("'cnn'" if name == "ppo-cnn" else "'multiinput'") in a for a in archs)
