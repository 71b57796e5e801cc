"""Tiny manifests for trainer, resume and CLI tests (seconds each)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

#: The network section of every tiny manifest.
TINY_NETWORK = {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
                "head_config": {"hidden_size": [16]}}

#: The mutation section of the tiny actor-critic manifests (DDPG, TD3, MADDPG, MATD3).
ACTOR_CRITIC_MUTATION = {
    "probabilities": {"no_mut": 0.1, "arch_mut": 0.3, "new_layer": 0.5, "params_mut": 0.2,
                      "act_mut": 0.1, "rl_hp_mut": 0.3},
    "rl_hp_selection": {"lr_actor": {"min": 1e-4, "max": 1e-2},
                        "lr_critic": {"min": 1e-4, "max": 1e-2},
                        "batch_size": {"min": 8, "max": 64}},
    "rand_seed": 3,
}

TINY_DQN = {
    "algorithm": {"name": "DQN", "batch_size": 32, "lr": 1e-3, "learn_step": 4, "double": True},
    "environment": {"name": "CartPole-v1", "num_envs": 4},
    "network": TINY_NETWORK,
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
    "network": TINY_NETWORK,
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


def assert_same_members(a, b) -> None:
    """Same weights, hyperparameters and mutation labels, member by member."""
    assert_same_weights(a, b)
    for x, y in zip(a, b, strict=True):
        assert x.hyperparameters == y.hyperparameters and x.mut == y.mut


def assert_same_learning_rates(a, b) -> None:
    """Every optimizer of every member holds the same learning rate."""
    for x, y in zip(a, b, strict=True):
        assert {n: o.param_groups[0]["lr"] for n, o in x.optimizers.items()} == \
               {n: o.param_groups[0]["lr"] for n, o in y.optimizers.items()}


def manifest_trainer(manifest: dict, seed: int) -> Callable[..., Any]:
    """A factory of ``LocalTrainer``s for a fresh copy of ``manifest`` with ``seed``."""
    from agilerl.training.trainer import LocalTrainer

    return lambda **kwargs: LocalTrainer.from_manifest(manifest=copy.deepcopy(manifest),
                                                       seed=seed, **kwargs)


def runs_with_same_seed(make_trainer: Callable[..., Any]) -> list[tuple[list, list]]:
    """Two runs of ``make_trainer()``; asserts the same fitnesses and members."""
    runs = [make_trainer().train(verbose=False) for _ in range(2)]
    assert runs[0][1] == runs[1][1]
    assert_same_members(runs[0][0], runs[1][0])
    return runs


@dataclass
class ResumedRun:
    """An uninterrupted run and the run resumed from its first checkpoint."""

    full: Any
    full_pop: list
    full_fit: list
    checkpoints: list[Path]
    resumed: Any
    pop: list
    fit: list


def run_and_resume(make_trainer: Callable[..., Any], tmp_path: Path, checkpoint_steps: int,
                   **train_kwargs: Any) -> ResumedRun:
    """Trains ``make_trainer()`` with a checkpoint every ``checkpoint_steps``, then
    ``make_trainer(resume_from_checkpoint=<its first checkpoint>)`` to the end; asserts the
    two end with the same fitnesses and weights."""
    full = make_trainer()
    full_pop, full_fit = full.train(verbose=False, checkpoint_steps=checkpoint_steps,
                                    checkpoint_path=tmp_path / "ck", **train_kwargs)
    checkpoints = sorted((tmp_path / "ck").iterdir())
    assert checkpoints
    resumed = make_trainer(resume_from_checkpoint=checkpoints[0])
    pop, fit = resumed.train(verbose=False)
    assert fit == full_fit
    assert_same_weights(full_pop, pop)
    return ResumedRun(full, full_pop, full_fit, checkpoints, resumed, pop, fit)
