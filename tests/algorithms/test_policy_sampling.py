"""PPO's and IPPO's acting draws actions with the policy's probabilities and returns the
log-probabilities the update evaluates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agilerl.algorithms.core.policy_sampling import categorical_action, gaussian_action
from agilerl.networks.actor_critic import categorical_terms


def test_drawn_actions_follow_the_policy_and_carry_its_log_probabilities() -> None:
    probs = torch.tensor([0.1, 0.2, 0.0, 0.7])
    logits = probs.log().expand(40_000, 4)  # the third action can never be drawn
    action, log_prob = categorical_action(logits, False, np.random.default_rng(0))
    assert action.dtype == np.int64 and log_prob.dtype == np.float32
    frequencies = np.bincount(action, minlength=4) / len(action)
    np.testing.assert_allclose(frequencies, probs.numpy(), atol=0.01)
    assert frequencies[2] == 0
    np.testing.assert_allclose(log_prob, probs.log().numpy()[action], rtol=1e-6)
    greedy, _ = categorical_action(logits[:3], True, np.random.default_rng(0))
    assert greedy.tolist() == [3, 3, 3]


def test_masked_logits_are_never_drawn() -> None:
    logits = torch.zeros(10_000, 3)
    logits[:, 0] = torch.finfo(torch.float32).min  # how IPPO masks an illegal action
    action, log_prob = categorical_action(logits, False, np.random.default_rng(1))
    assert set(action.tolist()) == {1, 2}
    np.testing.assert_allclose(log_prob, np.log(0.5), rtol=1e-6)


def test_gaussian_actions_carry_the_normal_log_density() -> None:
    mean = torch.randn(1_000, 2, generator=torch.Generator().manual_seed(3))
    log_std = torch.full((2,), float(np.log(0.4)))
    action, log_prob = gaussian_action(mean, log_std, False, torch.Generator().manual_seed(4))
    normal = torch.distributions.Normal(mean, torch.full_like(mean, 0.4))
    want = normal.log_prob(torch.as_tensor(action)).sum(-1)
    np.testing.assert_allclose(log_prob, want.numpy(), rtol=1e-5, atol=1e-5)
    assert float((torch.as_tensor(action) - mean).std()) == pytest.approx(0.4, rel=0.05)
    mode, _ = gaussian_action(mean, log_std, True, None)
    np.testing.assert_array_equal(mode, mean.numpy())


def test_acting_stores_the_log_probability_the_update_computes_bit_for_bit() -> None:
    # Acting sees the 8 rows of a vector step; the update sees them among a minibatch.
    logits = torch.randn(128, 3, generator=torch.Generator().manual_seed(7)) * 4
    action, log_prob = categorical_action(logits[:8], False, np.random.default_rng(2))
    actions = torch.zeros(128, dtype=torch.long)
    actions[:8] = torch.as_tensor(action)
    update = categorical_terms(logits, actions).log_prob[:8]
    np.testing.assert_array_equal(log_prob, update.numpy())
