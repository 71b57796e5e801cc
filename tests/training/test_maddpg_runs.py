"""MADDPG and MATD3 through the trainer: same seed twice gives the same run, and a run
stopped at a checkpoint and resumed equals the uninterrupted run (joint replay memory,
per-agent noise states, delayed-update counters, both optimizers, mutations included)."""

from __future__ import annotations

import copy

import pytest

from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.training.trainer import LocalTrainer, UnsupportedAlgorithmError

from .conftest import (
    ACTOR_CRITIC_MUTATION,
    TINY_NETWORK,
    assert_same_learning_rates,
    manifest_trainer,
    run_and_resume,
    runs_with_same_seed,
)

TINY = {
    "algorithm": {"name": "MATD3", "batch_size": 16, "lr_actor": 1e-3, "lr_critic": 1e-3,
                  "learn_step": 4, "policy_freq": 2, "O_U_noise": True},
    "environment": {"name": "agilerl.envs.multi_agent_probe", "num_envs": 2,
                    "config": {"episode_length": 5, "early_exit": True}},
    "network": TINY_NETWORK,
    "mutation": ACTOR_CRITIC_MUTATION,
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "replay_buffer": {"max_size": 5000},
    "training": {"max_steps": 240, "evo_steps": 80, "pop_size": 2, "eval_loop": 1,
                 "learning_delay": 20},
}


def _manifest(name: str) -> dict:
    manifest = copy.deepcopy(TINY)
    manifest["algorithm"]["name"] = name
    if name == "MADDPG":
        del manifest["algorithm"]["policy_freq"]
    return manifest


def test_same_seed_same_run() -> None:
    make_trainer = manifest_trainer(_manifest("MADDPG"), seed=7)
    trainer = make_trainer()
    assert isinstance(trainer.memory, MultiAgentReplayBuffer)
    trainer.close()
    runs_with_same_seed(make_trainer)


@pytest.mark.parametrize("name", ["MADDPG", "MATD3"])
def test_resume_from_checkpoint_is_exact(name, tmp_path) -> None:
    manifest = _manifest(name)
    run = run_and_resume(manifest_trainer(manifest, seed=5), tmp_path,
                         manifest["training"]["evo_steps"])
    assert len(run.checkpoints) >= 2
    assert len(run.resumed.memory) == len(run.full.memory)
    assert_same_learning_rates(run.full_pop, run.pop)
    for a, b in zip(run.full_pop, run.pop, strict=True):
        assert a.hyperparameters == b.hyperparameters
        assert a.learn_counter == b.learn_counter
        assert a.noise["pointer_0"].state.tolist() == b.noise["pointer_0"].state.tolist()


def test_settings_it_does_not_honour_are_named() -> None:
    manifest = _manifest("MADDPG")
    manifest["replay_buffer"]["n_step_buffer"] = True
    with pytest.raises(UnsupportedAlgorithmError, match="replay_buffer.n_step_buffer"):
        LocalTrainer.from_manifest(manifest=manifest, seed=0)
    manifest = _manifest("MADDPG")
    manifest["algorithm"]["vect_noise_dim"] = 2
    with pytest.warns(UserWarning, match="algorithm.vect_noise_dim = 2 has no effect"):
        LocalTrainer.from_manifest(manifest=manifest, seed=0).close()
