"""Composite observations (one structured row per transition, images kept uint8) pass
through every buffer and its checkpoint unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from agilerl.components.replay_buffer import (
    MultiStepReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)
from agilerl.components.rollout_buffer import RolloutBuffer

ROW = np.dtype([("flip", np.int64), ("image", np.uint8, (3, 4, 4)), ("noise", np.float32, (2,))])


def _obs(n: int, start: int) -> np.ndarray:
    obs = np.zeros(n, dtype=ROW)
    obs["flip"] = np.arange(start, start + n)
    obs["image"] = 255
    obs["noise"] = 0.5
    return obs


@pytest.mark.parametrize("cls", [ReplayBuffer, PrioritizedReplayBuffer])
def test_replay_buffers_keep_structured_rows(cls):
    memory = cls(8, alpha=0.6) if cls is PrioritizedReplayBuffer else cls(8)
    for t in range(3):
        memory.add(obs=_obs(4, 4 * t), action=np.zeros(4, np.int64), next_obs=_obs(4, 4 * t + 1))
    batch = memory.sample(16)
    assert batch["obs"].dtype == ROW and batch["obs"]["image"].dtype == np.uint8
    assert set(batch["obs"]["flip"].tolist()) <= set(range(4, 12))  # the newest 8 survive
    again = cls(8, alpha=0.6) if cls is PrioritizedReplayBuffer else cls(8)
    again.load_state_dict(memory.state_dict())
    np.testing.assert_array_equal(again.sample(16, rng=np.random.default_rng(0))["obs"],
                                  memory.sample(16, rng=np.random.default_rng(0))["obs"])


def test_n_step_buffer_folds_structured_rows():
    memory = MultiStepReplayBuffer(10, n_step=2, gamma=0.9)
    for t in range(3):
        memory.add_vector_step(np.arange(2), obs=_obs(2, 10 * t), action=np.zeros(2),
                               reward=np.ones(2), next_obs=_obs(2, 10 * t + 1),
                               done=np.zeros(2, bool))
    stored = memory.state_dict()["data"]
    assert stored["obs"].dtype == ROW and len(memory) == 4
    assert stored["next_obs"]["flip"].tolist() == [11, 12, 21, 22]  # two steps on


def test_rollout_buffer_stores_rows_of_the_given_shape_and_dtype():
    rollout = RolloutBuffer(3, 2, ((), ROW), (), np.int64)
    image = RolloutBuffer(3, 2, ((3, 4, 4), np.uint8), (), np.int64)
    for t in range(3):
        rollout.add(_obs(2, t), np.zeros(2), 0, 0, 1, 0, True)
        image.add(np.full((2, 3, 4, 4), t, np.uint8), np.zeros(2), 0, 0, 1, 0, True)
    assert rollout.flat()["obs"].dtype == ROW and rollout.flat()["obs"].shape == (6,)
    assert image.flat()["obs"].dtype == np.uint8 and image.flat()["obs"].shape == (6, 3, 4, 4)
