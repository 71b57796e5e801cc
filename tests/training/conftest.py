"""Tiny manifests for trainer, resume and CLI tests (seconds each)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

TINY_DQN = {
    "algorithm": {"name": "DQN", "batch_size": 32, "lr": 1e-3, "learn_step": 4, "double": True},
    "environment": {"name": "CartPole-v1", "num_envs": 4},
    "network": {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
                "head_config": {"hidden_size": [16]}},
    "mutation": {
        "probabilities": {"no_mut": 0.2, "arch_mut": 0.2, "new_layer": 0.5, "params_mut": 0.2,
                          "act_mut": 0.2, "rl_hp_mut": 0.2},
        "rl_hp_selection": {"lr": {"min": 1e-4, "max": 1e-2},
                            "batch_size": {"min": 8, "max": 64}},
        "rand_seed": 3,
    },
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "replay_buffer": {"max_size": 5000},
    "training": {"max_steps": 600, "evo_steps": 200, "pop_size": 3, "eval_loop": 1,
                 "eval_steps": 50, "eps_start": 1.0, "eps_end": 0.1, "eps_decay": 0.99},
}

TINY_PPO = {
    "algorithm": {"name": "PPO", "batch_size": 32, "lr": 1e-3, "learn_step": 64,
                  "update_epochs": 2},
    "environment": {"name": "CartPole-v1", "num_envs": 4},
    "network": {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
                "head_config": {"hidden_size": [16]}},
    "mutation": {"probabilities": {"no_mut": 0.5, "arch_mut": 0.25, "new_layer": 0.5,
                                   "params_mut": 0.25, "act_mut": 0.0, "rl_hp_mut": 0.0}},
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "training": {"max_steps": 384, "evo_steps": 128, "pop_size": 2, "eval_steps": 50},
}


@pytest.fixture
def tiny_dqn() -> dict:
    return copy.deepcopy(TINY_DQN)


@pytest.fixture
def tiny_ppo() -> dict:
    return copy.deepcopy(TINY_PPO)


@pytest.fixture
def tiny_dqn_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_dqn.yaml"
    path.write_text(yaml.safe_dump(TINY_DQN, sort_keys=False))
    return path


def weights(population) -> list[dict]:
    """Every member's network weights (name -> state dict)."""
    return [{n: net.state_dict() for n, net in agent.networks.items()} for agent in population]


def assert_same_weights(a, b) -> None:
    import torch

    wa, wb = weights(a), weights(b)
    assert len(wa) == len(wb)
    for ma, mb in zip(wa, wb, strict=True):
        assert ma.keys() == mb.keys()
        for name in ma:
            assert ma[name].keys() == mb[name].keys(), name
            for key in ma[name]:
                assert torch.equal(ma[name][key], mb[name][key]), f"{name}.{key} differs"
