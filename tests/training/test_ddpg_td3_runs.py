"""DDPG and TD3 through the trainer: same seed twice gives the same run, and a run stopped
at a checkpoint and resumed equals the uninterrupted run (noise state, delayed-update
counters, both optimizers, mutations of the new networks included)."""

from __future__ import annotations

import copy

import pytest

from .conftest import (
    ACTOR_CRITIC_MUTATION,
    TINY_NETWORK,
    assert_same_learning_rates,
    manifest_trainer,
    run_and_resume,
    runs_with_same_seed,
)

TINY = {
    "algorithm": {"name": "TD3", "batch_size": 16, "lr_actor": 1e-3, "lr_critic": 1e-3,
                  "learn_step": 2, "policy_freq": 2},
    "environment": {"name": "Pendulum-v1", "num_envs": 2},
    "network": TINY_NETWORK,
    "mutation": ACTOR_CRITIC_MUTATION,
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
    runs_with_same_seed(manifest_trainer(_manifest(variant), seed=7))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_resume_from_checkpoint_is_exact(variant, tmp_path):
    manifest = _manifest(variant)
    run = run_and_resume(manifest_trainer(manifest, seed=5), tmp_path,
                         manifest["training"]["evo_steps"])
    assert len(run.checkpoints) >= 2
    assert_same_learning_rates(run.full_pop, run.pop)
    for a, b in zip(run.full_pop, run.pop, strict=True):
        assert a.hyperparameters == b.hyperparameters
        assert a.learn_counter == b.learn_counter
