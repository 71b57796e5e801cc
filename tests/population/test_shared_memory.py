"""The generation rule for a shared replay memory (agilerl.population.shared_memory)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from agilerl.components.replay_buffer import (
    MultiStepReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)
from agilerl.population.shared_memory import PENDING_KEY, SharedReplay


def _rows(start: int, n: int) -> dict[str, np.ndarray]:
    ids = np.arange(start, start + n, dtype=np.float32)
    return {"obs": ids[:, None], "action": ids.astype(np.int64), "reward": ids,
            "next_obs": ids[:, None] + 0.5, "done": np.zeros(n, dtype=bool)}


def _member(memory: ReplayBuffer, start: int, n: int, seen: list[set[float]]) -> None:
    """A member: records what it can see, then adds ``n`` rows numbered from ``start``."""
    seen.append(set(memory._data["obs"][: memory.size, 0].tolist()) if memory._data else set())
    for i in range(0, n, 2):
        memory.add_vector_step(np.arange(2), np.zeros(2, dtype=bool), **_rows(start + i, 2))
    memory.end_streams()


@pytest.mark.parametrize("kind", ["uniform", "nstep", "prioritized"])
def test_members_see_the_phase_start_plus_their_own_rows_and_merge_in_order(kind):
    memory = {"uniform": ReplayBuffer(50), "nstep": MultiStepReplayBuffer(50, 1, 0.9),
              "prioritized": PrioritizedReplayBuffer(50, alpha=0.6)}[kind]
    _member(memory, 0, 10, [])
    shared = SharedReplay(memory)
    seen: list[set[float]] = []
    for member in range(3):
        shared.begin_member()
        _member(memory, 100 * (member + 1), 8, seen)
        if kind == "prioritized":
            memory.update_priorities(np.array([1, memory.pos - 1]), np.array([5.0, 7.0]))
        shared.end_member()
    # nobody saw a sibling's rows of this phase
    assert all(s == set(range(10)) for s in seen)
    shared.end_phase()
    expected = list(range(10)) + [x for m in (100, 200, 300) for x in range(m, m + 8)]
    assert memory._data["obs"][: len(expected), 0].tolist() == expected
    assert len(memory) == 34 and memory.counter == 34
    if kind == "prioritized":
        leaves = memory._tree[memory._leaves:memory._leaves + 34]
        assert leaves[1] == pytest.approx(5.0 ** 0.6)  # an older row's update survives
        assert [leaves[17], leaves[25], leaves[33]] == pytest.approx([7.0 ** 0.6] * 3)
        assert memory._tree[1] == pytest.approx(leaves.sum())


def test_a_replica_applying_the_same_deltas_stays_identical():
    memory = PrioritizedReplayBuffer(20, alpha=0.5)
    _member(memory, 0, 16, [])
    replica = copy.deepcopy(memory)
    driver, worker = SharedReplay(memory), SharedReplay(replica)
    deltas = []
    for member in range(2):  # the worker trains both members, the driver only merges
        worker.begin_member()
        _member(replica, 100 * (member + 1), 6, [])  # wraps the ring of 20
        replica.update_priorities(np.array([3]), np.array([9.0]))
        deltas.append(worker.end_member())
    worker.end_phase()
    driver.end_phase(deltas)
    assert memory.state_dict()["pos"] == replica.state_dict()["pos"] == 8
    for name in memory._data:
        assert np.array_equal(memory._data[name], replica._data[name])
    assert np.array_equal(memory._tree, replica._tree)
    # slot 3 held an old row both members re-prioritised, but the merge overwrote it with
    # the second member's row 201: that row keeps the priority it had in its own view
    assert memory._data["obs"][3, 0] == 201
    assert memory._tree[memory._leaves + 3] == pytest.approx(1.0)
    assert memory.max_priority == pytest.approx(9.0)


def test_an_unfinished_phase_is_checkpointed_with_its_pending_deltas():
    memory = ReplayBuffer(30)
    shared = SharedReplay(memory)
    shared.begin_member()
    _member(memory, 0, 4, [])
    shared.end_member()
    state = shared.state_dict()
    assert state["size"] == 0 and len(state[PENDING_KEY]) == 1
    restored = ReplayBuffer(30)
    restored.load_state_dict(state)
    resumed = SharedReplay(restored, state[PENDING_KEY])
    resumed.begin_member()
    _member(restored, 50, 4, [])
    resumed.end_member()
    resumed.end_phase()
    assert restored._data["obs"][:8, 0].tolist() == [0, 1, 2, 3, 50, 51, 52, 53]
