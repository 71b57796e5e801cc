"""DDPG and TD3 populations that learn Pendulum-v1 to a mean return of -200 (slow: about a
minute each on one core; run with ``-m slow``)."""

from __future__ import annotations

import pytest

from agilerl.training.trainer import LocalTrainer


def _pendulum(name: str) -> dict:
    return {
        "algorithm": {"name": name, "batch_size": 128, "lr_actor": 1e-3, "lr_critic": 1e-3,
                      "learn_step": 1, "gamma": 0.99, "tau": 0.005, "policy_freq": 2,
                      "O_U_noise": False, "expl_noise": 0.1},
        "environment": {"name": "Pendulum-v1", "num_envs": 1},
        "network": {"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
                    "head_config": {"hidden_size": [64]}},
        "mutation": {"probabilities": {"no_mut": 0.6, "arch_mut": 0.1, "new_layer": 0.2,
                                       "params_mut": 0.1, "act_mut": 0.0, "rl_hp_mut": 0.2},
                     "rl_hp_selection": {"lr_actor": {"min": 1e-4, "max": 3e-3},
                                         "lr_critic": {"min": 1e-4, "max": 3e-3}}},
        "selection_strategy": {"tournament_size": 2, "elitism": True},
        "replay_buffer": {"max_size": 100_000},
        "training": {"max_steps": 30_000, "evo_steps": 2_000, "pop_size": 2, "eval_loop": 3,
                     "learning_delay": 500, "target_score": -200.0},
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ["DDPG", "TD3"])
def test_population_reaches_minus_200_on_pendulum(name):
    trainer = LocalTrainer.from_manifest(manifest=_pendulum(name), seed=1)
    _, fitnesses = trainer.train(verbose=False)
    assert max(fitnesses) >= -200.0
