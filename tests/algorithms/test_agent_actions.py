"""One agent's action encoding for MADDPG/MATD3: env actions, exploration, critic inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms.core.agent_actions import AgentActions
from agilerl.algorithms.core.spaces import IncompatibleSpaceError

CPU = torch.device("cpu")


def test_discrete_greedy_and_explore_give_valid_indices() -> None:
    space = spaces.Discrete(4, start=2)
    codec = AgentActions(space, "a", CPU)
    logits = np.array([[0.0, 5.0, 0.0, 0.0], [9.0, 0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(codec.to_env(logits), [3, 2])
    rng = np.random.default_rng(0)
    draws = np.stack([codec.explore(logits, None, rng) for _ in range(2000)])
    assert all(space.contains(int(x)) for x in draws.reshape(-1))
    # Gumbel-max samples follow softmax(logits): P(index 1 | row 0) = e^5 / (e^5 + 3).
    expected = np.exp(5.0) / (np.exp(5.0) + 3.0)
    assert abs(np.mean(draws[:, 0] == 3) - expected) < 0.02
    # The stored index becomes a one-hot critic action.
    one_hot = codec.critic_input(torch.tensor([2, 5]))
    torch.testing.assert_close(one_hot, torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]]))


def test_straight_through_sample_is_one_hot_with_gradients() -> None:
    codec = AgentActions(spaces.Discrete(3), "a", CPU)
    logits = torch.zeros((5, 3), requires_grad=True)
    sample = codec.policy_action(logits, torch.Generator().manual_seed(0), sample=True)
    assert torch.all(sample.sum(-1) == 1.0) and torch.all((sample == 0) | (sample == 1))
    (sample * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
    greedy = codec.policy_action(torch.tensor([[0.0, 1.0, 0.5]]), None, sample=False)
    torch.testing.assert_close(greedy, torch.tensor([[0.0, 1.0, 0.0]]))


def test_box_actions_scale_onto_bounds_and_back() -> None:
    space = spaces.Box(np.array([0.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32))
    codec = AgentActions(space, "a", CPU)
    env = codec.to_env(np.array([[-1.0, 1.0], [0.0, 0.0], [3.0, -3.0]]))
    np.testing.assert_allclose(env, [[0.0, 2.0], [0.5, 0.0], [1.0, -2.0]])
    assert env.dtype == np.float32
    back = codec.critic_input(torch.as_tensor(env))
    torch.testing.assert_close(back, torch.tensor([[-1.0, 1.0], [0.0, 0.0], [1.0, -1.0]]))
    noisy = codec.explore(np.zeros((2, 2)), np.full((2, 2), 5.0), np.random.default_rng(0))
    np.testing.assert_allclose(noisy, [[1.0, 2.0], [1.0, 2.0]])


@pytest.mark.parametrize("space", [spaces.MultiDiscrete([2, 3]),
                                   spaces.Box(-np.inf, np.inf, (2,), np.float32)])
def test_unsupported_action_spaces_name_the_agent(space: spaces.Space) -> None:
    with pytest.raises(IncompatibleSpaceError, match="agent 'listener_0'"):
        AgentActions(space, "listener_0", CPU)
