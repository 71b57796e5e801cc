"""RainbowDQN through LocalTrainer: prioritized n-step memory built from the manifest,
same seed same run, exact resume (memory, priorities, sum tree, n-step windows), refusals."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from agilerl.components.replay_buffer import (
    MultiStepReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)
from agilerl.training.trainer import LocalTrainer, UnsupportedAlgorithmError

from .conftest import (
    TINY_DQN,
    TINY_NETWORK,
    manifest_trainer,
    run_and_resume,
    runs_with_same_seed,
)

TINY_RAINBOW = {
    "algorithm": {"name": "RainbowDQN", "batch_size": 32, "lr": 1e-3, "learn_step": 4,
                  "v_min": 0.0, "v_max": 100.0, "num_atoms": 21, "combined_reward": True},
    "environment": {"name": "CartPole-v1", "num_envs": 4},
    "network": TINY_NETWORK,
    "mutation": TINY_DQN["mutation"],
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "replay_buffer": {"max_size": 5000, "per_buffer": True, "per_buffer_args": {"alpha": 0.6},
                      "n_step_buffer": True, "n_step_buffer_args": {"n_step": 3}},
    "training": {"max_steps": 600, "evo_steps": 200, "pop_size": 2, "eval_loop": 1,
                 "eval_steps": 50},
}


@pytest.fixture
def tiny_rainbow() -> dict:
    return copy.deepcopy(TINY_RAINBOW)


def test_the_manifest_builds_a_prioritized_n_step_memory(tiny_rainbow):
    trainer = LocalTrainer.from_manifest(manifest=tiny_rainbow, seed=0)
    memory = trainer.memory
    assert isinstance(memory, PrioritizedReplayBuffer) and memory.alpha == 0.6
    assert memory.window is not None and memory.window.n_step == 3
    assert memory.window.gamma == 0.99 and memory.window.keep_one_step
    tiny_rainbow["replay_buffer"]["per_buffer"] = False
    n_step = LocalTrainer.from_manifest(manifest=tiny_rainbow, seed=0).memory
    assert isinstance(n_step, MultiStepReplayBuffer) and n_step.n_step == 3
    del tiny_rainbow["replay_buffer"]["n_step_buffer"]
    with pytest.warns(UserWarning, match="combined_reward"):
        plain = LocalTrainer.from_manifest(manifest=tiny_rainbow, seed=0).memory
    assert type(plain) is ReplayBuffer


def test_training_fills_and_reprioritizes_the_memory(tiny_rainbow):
    trainer = LocalTrainer.from_manifest(manifest=tiny_rainbow, seed=1)
    trainer.train(verbose=False)
    memory = trainer.memory
    stored = memory.state_dict()["data"]
    assert {"n", "one_step_reward", "one_step_next_obs", "one_step_done"} <= set(stored)
    assert stored["n"].max() == 3 and stored["n"].min() >= 1
    leaves = memory._tree[memory._leaves: memory._leaves + len(memory)]
    assert len(np.unique(leaves)) > 10  # learned priorities, not all the initial maximum


def test_same_seed_same_run(tiny_rainbow):
    runs_with_same_seed(manifest_trainer(tiny_rainbow, seed=7))


def test_resume_with_per_and_n_step_is_exact(tiny_rainbow, tmp_path):
    run = run_and_resume(manifest_trainer(tiny_rainbow, seed=5), tmp_path,
                         tiny_rainbow["training"]["evo_steps"])
    a, b = run.full.memory.state_dict(), run.resumed.memory.state_dict()
    assert np.array_equal(a["tree"], b["tree"]) and a["max_priority"] == b["max_priority"]
    for name in a["data"]:
        assert np.array_equal(a["data"][name], b["data"][name]), name


def test_no_n_step_return_spans_two_training_calls(tiny_rainbow):
    """Each call resets the env and the memory is shared: a member's open windows are
    stored (as truncated episodes) before the next call, never joined to its stream."""
    trainer = LocalTrainer.from_manifest(manifest=tiny_rainbow, seed=2)
    trainer.train(verbose=False)
    memory = trainer.memory
    assert memory.window.pending == {}


def test_n_step_memory_is_refused_for_an_algorithm_that_cannot_use_it():
    manifest = copy.deepcopy(TINY_DQN)
    manifest["replay_buffer"]["n_step_buffer"] = True
    with pytest.raises(UnsupportedAlgorithmError, match="n_step_buffer: DQN does not learn"):
        LocalTrainer.from_manifest(manifest=manifest, seed=0)


def test_algorithm_n_step_without_an_n_step_memory_warns(tiny_rainbow):
    tiny_rainbow["algorithm"]["n_step"] = 4
    with pytest.warns(UserWarning, match="algorithm.n_step = 4 has no effect"):
        LocalTrainer.from_manifest(manifest=tiny_rainbow, seed=0)


RAINBOW_CARTPOLE = {
    "algorithm": {"name": "RainbowDQN", "batch_size": 64, "lr": 1e-3, "learn_step": 4,
                  "gamma": 0.99, "tau": 0.005, "v_min": 0.0, "v_max": 200.0, "num_atoms": 51,
                  "noise_std": 0.5, "beta": 0.4},
    "environment": {"name": "CartPole-v1", "num_envs": 8},
    "network": {"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
                "head_config": {"hidden_size": [64]}},
    "mutation": {"probabilities": {"no_mut": 0.4, "arch_mut": 0.2, "new_layer": 0.2,
                                   "params_mut": 0.2, "act_mut": 0.0, "rl_hp_mut": 0.2},
                 "rl_hp_selection": {"lr": {"min": 1e-4, "max": 5e-3},
                                     "batch_size": {"min": 32, "max": 256}},
                 "rand_seed": 42},
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "replay_buffer": {"max_size": 50_000, "per_buffer": True, "per_buffer_args": {"alpha": 0.6},
                      "n_step_buffer": True, "n_step_buffer_args": {"n_step": 3}},
    "training": {"max_steps": 100_000, "pop_size": 2, "evo_steps": 5_000, "eval_loop": 1,
                 "target_score": 475.0, "learning_delay": 1000},
}


@pytest.mark.slow
def test_rainbow_reaches_475_on_cartpole():
    """Under a minute on 2 cores (prioritized 3-step replay, noisy dueling C51)."""
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(RAINBOW_CARTPOLE), seed=1)
    _, fitnesses = trainer.train(verbose=False)
    assert max(fitnesses) >= 475.0


def test_gamma_is_not_mutable_since_the_n_step_memory_folds_rewards_with_it(tiny_rainbow):
    tiny_rainbow["mutation"]["rl_hp_selection"]["gamma"] = {"min": 0.9, "max": 0.999}
    with pytest.raises(ValueError, match="'gamma', which RainbowDQN cannot mutate"):
        LocalTrainer.from_manifest(manifest=tiny_rainbow, seed=0)
