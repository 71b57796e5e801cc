"""A PPO population with a CNN learns the image probe env (slow: run with ``-m slow``)."""

from __future__ import annotations

import pytest

from agilerl.training.trainer import LocalTrainer

#: The peer ``tests/ppo_cnn.yaml`` network, trained until it reads the images.
PPO_CNN = {
    "algorithm": {"name": "PPO", "lr": 1e-3, "learn_step": 240, "batch_size": 60,
                  "update_epochs": 4, "share_encoders": True},
    "environment": {"name": "DummyImage-v0", "num_envs": 6},
    "network": {"latent_dim": 64, "arch": "cnn",
                "encoder_config": {"channel_size": [32, 64], "kernel_size": [8, 4],
                                   "stride_size": [4, 2]},
                "head_config": {"hidden_size": [64]}},
    "mutation": {"probabilities": {"no_mut": 0.4, "arch_mut": 0.2, "new_layer": 0.2,
                                   "params_mut": 0.2, "act_mut": 0.0, "rl_hp_mut": 0.2},
                 "rl_hp_selection": {"lr": {"min": 1e-4, "max": 3e-3}}},
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "training": {"max_steps": 30_000, "evo_steps": 2_400, "pop_size": 2, "eval_loop": 2,
                 "target_score": 7.8},
}


@pytest.mark.slow
def test_ppo_with_a_cnn_learns_the_image_probe():
    trainer = LocalTrainer.from_manifest(manifest=PPO_CNN, seed=1)
    _, fitnesses = trainer.train(verbose=False)
    assert max(fitnesses) >= 7.8  # of 8: the bright half named at (nearly) every step
