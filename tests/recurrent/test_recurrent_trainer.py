"""Recurrent PPO through the trainer: same seed twice, stopped and resumed equals uninterrupted.

By design a member's recurrent state is not checkpointed: each training call resets the
env with its seed and starts every sub-env from a zero state (as evaluation does), so a
call depends only on the agent's state and the seed, and resuming repeats it exactly.
"""

from __future__ import annotations

import copy

from agilerl.training.trainer import LocalTrainer
from tests.training.conftest import assert_same_weights

TINY_RPPO = {
    "algorithm": {"name": "PPO", "batch_size": 8, "lr": 1e-3, "learn_step": 64,
                  "update_epochs": 2, "recurrent": True, "max_seq_len": 8,
                  "bptt_sequence_type": "fifty_percent_overlap"},
    "environment": {"name": "CartPole-v1", "num_envs": 4},
    "network": {"latent_dim": 16, "encoder_config": {"hidden_state_size": 16},
                "head_config": {"hidden_size": [16]}},
    "mutation": {"probabilities": {"no_mut": 0.25, "arch_mut": 0.5, "new_layer": 0.5,
                                   "params_mut": 0.25, "act_mut": 0.0, "rl_hp_mut": 0.0}},
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "training": {"max_steps": 384, "evo_steps": 128, "pop_size": 2, "eval_steps": 50},
}


def test_the_deferred_network_of_recurrent_ppo_is_an_lstm():
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_RPPO), seed=1)
    encoder = trainer.population[0].actor_critic.encoder("encoder")
    assert encoder.kind == "lstm" and encoder.arch["hidden_state_size"] == 16


def test_same_seed_same_run():
    runs = [LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_RPPO), seed=3)
            .train(verbose=False) for _ in range(2)]
    assert runs[0][1] == runs[1][1]
    assert_same_weights(runs[0][0], runs[1][0])


def test_resume_from_checkpoint_is_exact(tmp_path):
    evo = TINY_RPPO["training"]["evo_steps"]
    full = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_RPPO), seed=5)
    full_pop, full_fit = full.train(verbose=False, checkpoint_steps=evo,
                                    checkpoint_path=tmp_path / "ck")
    first = sorted((tmp_path / "ck").iterdir())[0]
    resumed = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_RPPO), seed=5,
                                         resume_from_checkpoint=first)
    res_pop, res_fit = resumed.train(verbose=False)
    assert res_fit == full_fit
    assert_same_weights(full_pop, res_pop)
    assert [a.actor_critic.architecture() for a in res_pop] == \
        [a.actor_critic.architecture() for a in full_pop]
