"""One agent's action encoding for MADDPG/MATD3: env actions, exploration, critic inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agilerl.algorithms.core.agent_actions import AgentActions
from agilerl.core.spaces import IncompatibleSpaceError

CPU = torch.device("cpu")


def test_discrete_actions_sample_the_policy_and_store_its_relaxed_vector() -> None:
    space = spaces.Discrete(4, start=2)
    codec = AgentActions(space, "a", CPU)
    logits = np.array([[0.0, 5.0, 0.0, 0.0], [9.0, 0.0, 0.0, 0.0]])
    rng = np.random.default_rng(0)
    draws, vectors = zip(*(codec.act(logits, None, rng) for _ in range(2000)), strict=True)
    indices = np.stack(draws)
    assert all(space.contains(int(x)) for x in indices.reshape(-1))
    # Without noise the env action is a draw from softmax(logits) (Gumbel-max):
    # P(index 1 | row 0) = e^5 / (e^5 + 3).
    expected = np.exp(5.0) / (np.exp(5.0) + 3.0)
    assert abs(np.mean(indices[:, 0] == 3) - expected) < 0.02
    # The stored vector is the relaxed sample whose argmax was played.
    stored = np.stack(vectors)
    assert stored.shape == (2000, 2, 4) and stored.dtype == np.float32
    np.testing.assert_allclose(stored.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(stored.argmax(-1) + 2, indices)
    # Critics read stored vectors as they are, and a stored index as its one-hot vector.
    torch.testing.assert_close(codec.critic_input(torch.as_tensor(stored[0])),
                               torch.as_tensor(stored[0]))
    one_hot = codec.critic_input(torch.tensor([2, 5]))
    torch.testing.assert_close(one_hot, torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]]))


def test_discrete_exploration_noise_moves_the_vector_and_respects_the_mask() -> None:
    codec = AgentActions(spaces.Discrete(3), "a", CPU)
    logits = np.zeros((2, 3))
    noise = np.array([[0.0, 0.0, 5.0], [5.0, 0.0, 0.0]])
    mask = np.array([[True, True, True], [False, True, True]])
    env, stored = codec.act(logits, noise, np.random.default_rng(0), mask)
    # The noise decides the first row (clipped to 1); the second row's noisy entry is
    # illegal, so it is zeroed and never played.
    assert env[0] == 2 and stored[0, 2] == 1.0
    assert env[1] in (1, 2) and stored[1, 0] == 0.0
    assert np.all((stored >= 0.0) & (stored <= 1.0))


def test_policy_action_is_a_differentiable_relaxed_sample() -> None:
    codec = AgentActions(spaces.Discrete(3), "a", CPU)
    logits = torch.zeros((5, 3), requires_grad=True)
    sample = codec.policy_action(logits, torch.Generator().manual_seed(0))
    torch.testing.assert_close(sample.sum(-1), torch.ones(5))
    # A soft vector, not a one-hot: the critic is queried where it was trained.
    assert torch.all((sample > 0) & (sample < 1))
    (sample * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
    masked = codec.policy_action(torch.zeros((4, 3)), torch.Generator().manual_seed(1),
                                 mask=torch.tensor([[True, False, True]] * 4))
    assert torch.all(masked[:, 1] == 0.0)


def test_box_actions_scale_onto_bounds_and_back() -> None:
    space = spaces.Box(np.array([0.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32))
    codec = AgentActions(space, "a", CPU)
    env, stored = codec.act(np.array([[-1.0, 1.0], [0.0, 0.0], [3.0, -3.0]]), None,
                            np.random.default_rng(0))
    np.testing.assert_allclose(env, [[0.0, 2.0], [0.5, 0.0], [1.0, -2.0]])
    assert env.dtype == np.float32 and stored is env
    back = codec.critic_input(torch.as_tensor(env))
    torch.testing.assert_close(back, torch.tensor([[-1.0, 1.0], [0.0, 0.0], [1.0, -1.0]]))
    noisy, _ = codec.act(np.zeros((2, 2)), np.full((2, 2), 5.0), np.random.default_rng(0))
    np.testing.assert_allclose(noisy, [[1.0, 2.0], [1.0, 2.0]])


@pytest.mark.parametrize("space", [spaces.MultiDiscrete([2, 3]),
                                   spaces.Box(-np.inf, np.inf, (2,), np.float32)])
def test_unsupported_action_spaces_name_the_agent(space: spaces.Space) -> None:
    with pytest.raises(IncompatibleSpaceError, match="agent 'listener_0'"):
        AgentActions(space, "listener_0", CPU)
