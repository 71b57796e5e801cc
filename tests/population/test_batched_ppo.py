"""training.batched_updates for PPO: members learn together, with the results of a
sequential run, and regroup when mutations change their architectures."""

from __future__ import annotations

import copy

import pytest

from tests.population.test_batched_updates import (
    _assert_close,
    _train,
    phase_groups,
    resume_batched_run_exactly,
)
from tests.training.conftest import TINY_PPO

#: Four same-architecture members whose learning hyperparameters mutate (differing
#: minibatch sizes and counts, epochs and coefficients; the groups stay whole).
SAME_ARCH = copy.deepcopy(TINY_PPO)
SAME_ARCH["mutation"]["probabilities"] = {"no_mut": 0.2, "arch_mut": 0.0, "new_layer": 0.0,
                                          "params_mut": 0.2, "act_mut": 0.0, "rl_hp_mut": 0.6}
SAME_ARCH["mutation"]["rl_hp_selection"] = {
    "lr": {"min": 1e-4, "max": 1e-2}, "batch_size": {"min": 8, "max": 64},
    "learn_step": {"min": 32, "max": 128}, "ent_coef": {"min": 0.001, "max": 0.1},
    "update_epochs": {"min": 1, "max": 4}}
SAME_ARCH["training"]["pop_size"] = 4

#: Architecture mutations split the population into groups that change every generation.
MUTATING = copy.deepcopy(TINY_PPO)
MUTATING["training"]["pop_size"] = 4

__all__ = ["phase_groups"]  # the fixture


def test_batched_ppo_run_equals_the_sequential_run(phase_groups):
    pop_seq, fit_seq = _train(SAME_ARCH, batched=False)
    pop_bat, fit_bat = _train(SAME_ARCH, batched=True)
    assert phase_groups == [[4]] * 3  # every phase learned as one group of four
    hps = [a.hyperparameters for a in pop_bat]
    assert len({(h["batch_size"], h["learn_step"], h["update_epochs"]) for h in hps}) > 1
    assert fit_bat == pytest.approx(fit_seq, rel=1e-4)
    assert [a.hyperparameters for a in pop_seq] == hps
    assert [a.steps for a in pop_seq] == [a.steps for a in pop_bat]
    _assert_close(pop_seq, pop_bat)


def test_architecture_mutations_regroup_ppo_members(phase_groups):
    pop_seq, fit_seq = _train(MUTATING, batched=False)
    pop_bat, fit_bat = _train(MUTATING, batched=True)
    assert len(phase_groups) == 3 and len({tuple(g) for g in phase_groups}) > 1
    assert any(max(groups) > 1 for groups in phase_groups)
    assert fit_bat == pytest.approx(fit_seq, rel=1e-4)
    assert [a.mut for a in pop_seq] == [a.mut for a in pop_bat]
    _assert_close(pop_seq, pop_bat)


def test_a_batched_ppo_run_resumes_exactly(tmp_path):
    resume_batched_run_exactly(SAME_ARCH, tmp_path)
