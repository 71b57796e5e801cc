"""``training.sum_scores``: multi-agent scores summed over agents (default) or kept per agent.

With ``sum_scores: false`` each evaluation records every agent's mean greedy return
(``agent_fitness``), and the number selection and early stopping use (``fitness``) is the
mean of that row over agents, as the reference ranks its per-agent fitness rows; training
scores are the per-episode mean over agents. The setting reaches every member from the
manifest and survives cloning and checkpoints.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from agilerl.algorithms import IPPO, MADDPG
from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.core.multi_agent import MultiAgentReturns, agent_spaces
from agilerl.envs import multi_agent_probe
from agilerl.envs.pettingzoo_env import PettingZooVectorEnv
from agilerl.training.trainer import LocalTrainer

NET = {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
       "head_config": {"hidden_size": [16]}}

MANIFEST = {
    "algorithm": {"name": "IPPO", "batch_size": 32, "learn_step": 64, "update_epochs": 1,
                  "action_std_init": 0.5},
    "environment": {"name": "agilerl.envs.multi_agent_probe", "num_envs": 4,
                    "config": {"early_exit": True}},
    "network": NET,
    "mutation": {"probabilities": {"no_mut": 0.5, "arch_mut": 0.0, "params_mut": 0.5,
                                   "rl_hp_mut": 0.0}, "rand_seed": 1},
    "selection_strategy": {"tournament_size": 2, "elitism": True},
    "training": {"max_steps": 128, "evo_steps": 64, "pop_size": 2, "eval_steps": 20},
}


def _env(**config) -> PettingZooVectorEnv:
    return PettingZooVectorEnv([lambda: multi_agent_probe.parallel_env(**config)] * 4)


@pytest.mark.parametrize("algorithm", [IPPO, MADDPG])
def test_per_agent_fitness_is_recorded_and_selection_uses_its_mean(algorithm) -> None:
    torch.set_num_threads(1)
    env = _env(early_exit=True)
    obs, act = agent_spaces(env)
    agent = algorithm(obs, act, net_config=NET, seed=0)
    summed = agent.test(env, seed=3)
    agent.sum_scores = False
    per_agent_mean = agent.test(env, seed=3)
    row = agent.agent_fitness[-1]
    assert set(row) == {"seeker_0", "seeker_1", "pointer_0"}
    assert per_agent_mean == pytest.approx(float(np.mean(list(row.values()))))
    # The same greedy episodes: the sum of the per-agent means is the summed fitness.
    assert sum(row.values()) == pytest.approx(summed)
    assert agent.fitness == [summed, per_agent_mean]
    assert per_agent_mean != pytest.approx(summed)


def test_training_score_is_the_mean_over_agents_without_summing() -> None:
    returns = MultiAgentReturns(["a_0", "b_0"], num_envs=2)
    returns.update({"a_0": np.array([1.0, 2.0]), "b_0": np.array([3.0, 6.0])},
                   {"a_0": np.ones(2, bool), "b_0": np.ones(2, bool)}, np.ones(2, bool))
    assert returns.score() == pytest.approx(6.0)  # (4 + 8) / 2 episodes
    assert returns.score(sum_scores=False) == pytest.approx(3.0)  # (2 + 4) / 2


@pytest.mark.parametrize("sum_scores", [True, False])
def test_the_manifest_setting_reaches_members_clones_and_checkpoints(
    sum_scores: bool, tmp_path
) -> None:
    manifest = copy.deepcopy(MANIFEST)
    manifest["training"]["sum_scores"] = sum_scores
    trainer = LocalTrainer.from_manifest(manifest=manifest, seed=2)
    population, _ = trainer.train(verbose=False, save_elite=True,
                                  elite_path=tmp_path / "elite.pt")
    for agent in population:  # after the last selection: each with its source's records
        assert agent.sum_scores is sum_scores
        row = agent.agent_fitness[-1]
        expected = sum(row.values()) if sum_scores else float(np.mean(list(row.values())))
        assert agent.fitness[-1] == pytest.approx(expected)
        assert agent.clone().sum_scores is sum_scores
    elite = RLAlgorithm.load(tmp_path / "elite.pt")
    assert elite.sum_scores is sum_scores and elite.agent_fitness
