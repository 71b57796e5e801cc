"""DDPG and TD3 through the trainer: same seed twice gives the same run, and a run stopped
at a checkpoint and resumed equals the uninterrupted run (noise state, delayed-update
counters, both optimizers, mutations of the new networks included)."""

from __future__ import annotations

import copy

import pytest

from agilerl.training.trainer import LocalTrainer

from .conftest import assert_same_weights

TINY = {
    "algorithm": {"name": "TD3", "batch_size": 16, "lr_actor": 1e-3, "lr_critic": 1e-3,
                  "learn_step": 2, "policy_freq": 2},
    "environment": {"name": "Pendulum-v1", "num_envs": 2},
    "network": {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
                "head_config": {"hidden_size": [16]}},
    "mutation": {
        "probabilities": {"no_mut": 0.1, "arch_mut": 0.3, "new_layer": 0.5, "params_mut": 0.2,
                          "act_mut": 0.1, "rl_hp_mut": 0.3},
        "rl_hp_selection": {"lr_actor": {"min": 1e-4, "max": 1e-2},
                            "lr_critic": {"min": 1e-4, "max": 1e-2},
                            "batch_size": {"min": 8, "max": 64}},
        "rand_seed": 3,
    },
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "replay_buffer": {"max_size": 5000},
    "training": {"max_steps": 600, "evo_steps": 200, "pop_size": 3, "eval_loop": 1,
                 "eval_steps": 50, "learning_delay": 50},
}

VARIANTS = {
    "td3-gaussian": {"name": "TD3", "O_U_noise": False},
    "ddpg-ou-shared": {"name": "DDPG", "O_U_noise": True, "share_encoders": True},
}


def _manifest(variant: str) -> dict:
    manifest = copy.deepcopy(TINY)
    manifest["algorithm"].update(VARIANTS[variant])
    return manifest


@pytest.mark.parametrize("variant", ["ddpg-ou-shared"])  # TD3: the resume test runs it twice
def test_same_seed_same_run(variant):
    runs = [LocalTrainer.from_manifest(manifest=_manifest(variant), seed=7).train(verbose=False)
            for _ in range(2)]
    assert runs[0][1] == runs[1][1]
    assert_same_weights(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][0], runs[1][0], strict=True):
        assert a.hyperparameters == b.hyperparameters and a.mut == b.mut


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_resume_from_checkpoint_is_exact(variant, tmp_path):
    manifest = _manifest(variant)
    evo = manifest["training"]["evo_steps"]
    full = LocalTrainer.from_manifest(manifest=manifest, seed=5)
    full_pop, full_fit = full.train(verbose=False, checkpoint_steps=evo,
                                    checkpoint_path=tmp_path / "ck")
    checkpoints = sorted((tmp_path / "ck").iterdir())
    assert len(checkpoints) >= 2
    resumed = LocalTrainer.from_manifest(manifest=manifest, seed=5,
                                         resume_from_checkpoint=checkpoints[0])
    res_pop, res_fit = resumed.train(verbose=False)
    assert res_fit == full_fit
    assert_same_weights(full_pop, res_pop)
    for a, b in zip(full_pop, res_pop, strict=True):
        assert a.hyperparameters == b.hyperparameters
        assert a.learn_counter == b.learn_counter
        assert {n: o.state_dict()["param_groups"][0]["lr"] for n, o in a.optimizers.items()} == \
               {n: o.state_dict()["param_groups"][0]["lr"] for n, o in b.optimizers.items()}
