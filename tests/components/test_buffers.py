"""Replay and rollout buffers: ring wrap, sampling, checkpoints, n-step folding, GAE."""

from __future__ import annotations

import numpy as np
import pytest

from agilerl.components.replay_buffer import MultiStepReplayBuffer, ReplayBuffer
from agilerl.components.rollout_buffer import RolloutBuffer


def _batch(start: int, n: int) -> dict[str, np.ndarray]:
    ids = np.arange(start, start + n)
    return {
        "obs": np.stack([ids, ids], axis=1).astype(np.float32),
        "action": ids,
        "done": ids % 2 == 0,
    }


def test_ring_buffer_wraps_and_keeps_newest():
    buf = ReplayBuffer(5, seed=0)
    buf.add(_batch(0, 3))
    buf.add(_batch(3, 4))  # wraps: 7 added, capacity 5
    assert len(buf) == 5 and buf.counter == 7
    assert sorted(buf.state_dict()["data"]["action"].tolist()) == [2, 3, 4, 5, 6]
    buf.add(_batch(10, 12))  # larger than capacity
    assert sorted(buf.state_dict()["data"]["action"].tolist()) == [17, 18, 19, 20, 21]


def test_sample_shapes_dtypes_and_seeded_generator():
    buf = ReplayBuffer(100, seed=0)
    buf.add(_batch(0, 50))
    a = buf.sample(8, np.random.default_rng(1))
    b = buf.sample(8, np.random.default_rng(1))
    assert a["obs"].shape == (8, 2) and a["obs"].dtype == np.float32 and a["done"].dtype == bool
    assert np.array_equal(a["action"], b["action"])
    assert np.array_equal(a["obs"][:, 0], a["action"].astype(np.float32))  # rows stay aligned
    with pytest.raises(KeyError):
        buf.add({"obs": np.zeros((1, 2))})
    with pytest.raises(ValueError):
        ReplayBuffer(10).sample(1)


def test_state_dict_round_trip_continues_identically():
    buf = ReplayBuffer(10, seed=3)
    buf.add(_batch(0, 13))
    copy = ReplayBuffer(1)
    copy.load_state_dict(buf.state_dict())
    buf.add(_batch(20, 4))
    copy.add(_batch(20, 4))
    assert np.array_equal(buf.sample(6)["action"], copy.sample(6)["action"])
    assert (copy.pos, copy.size, copy.counter) == (buf.pos, buf.size, buf.counter)


def test_multistep_buffer_folds_discounted_rewards_per_env():
    buf = MultiStepReplayBuffer(100, n_step=3, gamma=0.5)
    for t in range(4):
        buf.add_vector_step(
            np.array([0, 1]),
            obs=np.array([[t], [10 + t]], dtype=np.float32),
            action=np.array([0, 1]),
            reward=np.array([1.0, 2.0], dtype=np.float32),
            next_obs=np.array([[t + 1], [11 + t]], dtype=np.float32),
            done=np.array([False, t == 1]),
        )
    data = buf.state_dict()["data"]
    rows = {
        float(o[0]): (float(r), float(n[0]), int(k))
        for o, r, n, k in zip(data["obs"], data["reward"], data["next_obs"], data["n"], strict=True)
    }
    assert rows[0.0] == (1.75, 3.0, 3)  # 1 + 0.5 + 0.25, three steps ahead
    assert rows[1.0] == (1.75, 4.0, 3)
    assert rows[10.0] == (3.0, 12.0, 2)  # episode ended after two steps
    assert rows[11.0] == (2.0, 12.0, 1)


def test_gae_matches_hand_computation_and_masks_invalid_steps():
    gamma, lam = 0.9, 0.8
    buf = RolloutBuffer(4, 1, 1, (), np.int64)
    values = [0.5, 0.4, 0.3, 0.2]
    rewards = [1.0, 2.0, 0.0, 3.0]
    ended = [0, 1, 0, 0]
    valid = [True, True, False, True]
    for t in range(4):
        buf.add([[t]], [0], 0.0, values[t], rewards[t], ended[t], valid[t])
    buf.compute_gae(np.array([1.0]), gamma, lam)
    a3 = 3.0 + gamma * 1.0 - 0.2
    a1 = 2.0 - 0.4
    a0 = (1.0 + gamma * 0.4 - 0.5) + gamma * lam * a1
    np.testing.assert_allclose(buf.advantages[:, 0], [a0, a1, 0.0, a3], rtol=1e-6)
    flat = buf.flat()
    assert len(flat["advantages"]) == 3
    np.testing.assert_allclose(flat["returns"], [a0 + 0.5, a1 + 0.4, a3 + 0.2], rtol=1e-6)


def test_prioritized_buffer_samples_by_priority_and_weights():
    from agilerl.components.replay_buffer import PrioritizedReplayBuffer

    buf = PrioritizedReplayBuffer(6, alpha=1.0, seed=0)
    buf.add(_batch(0, 4))
    buf.update_priorities(np.arange(4), np.array([1.0, 1.0, 1.0, 97.0]))
    draws = np.concatenate([buf.sample(10, beta=1.0)["action"] for _ in range(100)])
    assert 0.9 < np.mean(draws == 3) < 1.0
    batch = buf.sample(4, beta=1.0)
    low = batch["weights"][batch["action"] != 3]
    assert batch["weights"].max() == pytest.approx(1.0) and (low.size == 0 or low.max() == 1.0)
    buf.add(_batch(4, 4))  # wraps; new rows get the max priority (97)
    assert len(buf) == 6 and buf._tree[1] == pytest.approx(97.0 * 5 + 1.0)
    copy = PrioritizedReplayBuffer(1, alpha=0.5)
    copy.load_state_dict(buf.state_dict())
    assert np.array_equal(
        copy.sample(5, rng=np.random.default_rng(0))["indices"],
        buf.sample(5, rng=np.random.default_rng(0))["indices"],
    )


def test_prioritized_buffer_takes_the_generator_where_the_uniform_one_does():
    """A generator passed by position is the one sampled with, as for ``ReplayBuffer``;
    ``beta`` is keyword-only, so it can never take a generator's place."""
    from agilerl.components.replay_buffer import PrioritizedReplayBuffer

    buf = PrioritizedReplayBuffer(8, alpha=1.0, seed=0)
    buf.add(_batch(0, 8))
    buf.update_priorities(np.arange(8), np.arange(1.0, 9.0))
    by_position = buf.sample(6, np.random.default_rng(3))
    by_keyword = buf.sample(6, rng=np.random.default_rng(3), beta=0.4)
    np.testing.assert_array_equal(by_position["indices"], by_keyword["indices"])
    np.testing.assert_array_equal(by_position["weights"], by_keyword["weights"])
    with pytest.raises(TypeError):
        buf.sample(6, np.random.default_rng(3), 0.4)


def test_n_step_windows_flush_as_truncated_episodes_and_round_trip():
    from agilerl.components.replay_buffer import PrioritizedReplayBuffer

    def step(buf, t, truncated=False):
        buf.add_vector_step(np.array([0]), np.array([truncated]),
                            obs=np.array([[t]], np.float32), action=np.array([0]),
                            reward=np.array([1.0], np.float32),
                            next_obs=np.array([[t + 1]], np.float32), done=np.array([False]))

    buf = PrioritizedReplayBuffer(50, alpha=0.5, n_step=3, gamma=0.5, keep_one_step=True)
    for t in range(2):
        step(buf, t)
    assert len(buf) == 0 and len(buf.window.pending[0]) == 2
    copy = PrioritizedReplayBuffer(50, alpha=0.5, n_step=3, gamma=0.5, keep_one_step=True)
    copy.load_state_dict(buf.state_dict())  # open windows are part of the state
    for b in (buf, copy):
        b.end_streams()
    for b in (buf, copy):
        data = b.state_dict()["data"]
        assert data["n"].tolist() == [2, 1] and data["reward"].tolist() == [1.5, 1.0]
        assert data["next_obs"][:, 0].tolist() == [2.0, 2.0]  # bootstrapped, not done
        assert data["one_step_next_obs"][:, 0].tolist() == [1.0, 2.0]
        assert b.window.pending == {}
    step(buf, 10, truncated=True)  # a truncation ends the window at once
    assert len(buf) == 3 and buf.window.pending[0] == []
    with pytest.raises(ValueError, match="n-step"):
        ReplayBuffer(10).load_state_dict(buf.state_dict())
