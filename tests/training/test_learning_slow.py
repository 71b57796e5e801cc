"""Populations that learn CartPole-v1 to 475 (slow: minutes; run with ``-m slow``)."""

from __future__ import annotations

import pytest

from agilerl.demo import demo_manifest
from agilerl.training.trainer import LocalTrainer

PPO_CARTPOLE = {
    "algorithm": {"name": "PPO", "batch_size": 128, "lr": 1e-3, "learn_step": 1024,
                  "gamma": 0.99, "gae_lambda": 0.95, "clip_coef": 0.2, "ent_coef": 0.01,
                  "vf_coef": 0.5, "max_grad_norm": 0.5, "update_epochs": 4},
    "environment": {"name": "CartPole-v1", "num_envs": 8},
    "network": {"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
                "head_config": {"hidden_size": [64]}},
    "mutation": {"probabilities": {"no_mut": 0.4, "arch_mut": 0.2, "new_layer": 0.2,
                                   "params_mut": 0.2, "act_mut": 0.0, "rl_hp_mut": 0.2},
                 "rl_hp_selection": {"lr": {"min": 1e-4, "max": 3e-3}}},
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "training": {"max_steps": 300_000, "evo_steps": 10_240, "pop_size": 4,
                 "target_score": 475.0},
}


@pytest.mark.slow
@pytest.mark.parametrize("manifest", [demo_manifest(), PPO_CARTPOLE], ids=["DQN", "PPO"])
def test_population_reaches_475(manifest):
    trainer = LocalTrainer.from_manifest(manifest=manifest, seed=1)
    _, fitnesses = trainer.train(verbose=False)
    assert max(fitnesses) >= 475.0
