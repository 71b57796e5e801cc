"""MADDPG and MATD3 through the trainer: same seed twice gives the same run, and a run
stopped at a checkpoint and resumed equals the uninterrupted run (joint replay memory,
per-agent noise states, delayed-update counters, both optimizers, mutations included)."""

from __future__ import annotations

import copy

import pytest

from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.training.trainer import LocalTrainer, UnsupportedAlgorithmError

from .conftest import assert_same_weights

TINY = {
    "algorithm": {"name": "MATD3", "batch_size": 16, "lr_actor": 1e-3, "lr_critic": 1e-3,
                  "learn_step": 4, "policy_freq": 2, "O_U_noise": True},
    "environment": {"name": "agilerl.envs.multi_agent_probe", "num_envs": 2,
                    "config": {"episode_length": 5, "early_exit": True}},
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
    runs = [LocalTrainer.from_manifest(manifest=_manifest("MADDPG"), seed=7)
            for _ in range(2)]
    assert isinstance(runs[0].memory, MultiAgentReplayBuffer)
    results = [trainer.train(verbose=False) for trainer in runs]
    assert results[0][1] == results[1][1]
    assert_same_weights(results[0][0], results[1][0])
    for a, b in zip(results[0][0], results[1][0], strict=True):
        assert a.hyperparameters == b.hyperparameters and a.mut == b.mut


@pytest.mark.parametrize("name", ["MADDPG", "MATD3"])
def test_resume_from_checkpoint_is_exact(name, tmp_path) -> None:
    manifest = _manifest(name)
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
    assert len(resumed.memory) == len(full.memory)
    for a, b in zip(full_pop, res_pop, strict=True):
        assert a.hyperparameters == b.hyperparameters
        assert a.learn_counter == b.learn_counter
        assert a.noise["pointer_0"].state.tolist() == b.noise["pointer_0"].state.tolist()
        assert {n: o.state_dict()["param_groups"][0]["lr"] for n, o in a.optimizers.items()} == \
               {n: o.state_dict()["param_groups"][0]["lr"] for n, o in b.optimizers.items()}


def test_settings_it_does_not_honour_are_named() -> None:
    manifest = _manifest("MADDPG")
    manifest["replay_buffer"]["n_step_buffer"] = True
    with pytest.raises(UnsupportedAlgorithmError, match="replay_buffer.n_step_buffer"):
        LocalTrainer.from_manifest(manifest=manifest, seed=0)
    manifest = _manifest("MADDPG")
    manifest["algorithm"]["vect_noise_dim"] = 2
    with pytest.warns(UserWarning, match="algorithm.vect_noise_dim = 2 has no effect"):
        LocalTrainer.from_manifest(manifest=manifest, seed=0).close()
