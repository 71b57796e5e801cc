"""BPTT sequences cut from a rollout: windows, padding, episode starts, initial states."""

from __future__ import annotations

import numpy as np
import pytest

from agilerl.components.rollout_buffer import RolloutBuffer


def _filled(steps: int = 7, envs: int = 2) -> RolloutBuffer:
    buf = RolloutBuffer(steps, envs, 1, (), np.int64)
    for t in range(steps):
        ended = np.array([t == 2, False])
        valid = np.array([t != 3, True])  # env 0: NEXT_STEP autoreset step at t = 3
        hidden = {"encoder": np.full((envs, 2, 3), t, dtype=np.float32)}
        buf.add(np.array([[t], [10 + t]]), np.zeros(envs), 0.0, 0.0, 1.0, ended, valid, hidden)
    return buf


@pytest.mark.parametrize(("kind", "firsts"), [
    ("chunked", [0, 3, 6]),
    ("fifty_percent_overlap", [0, 1, 2, 3, 4]),
    ("maximum", [0, 1, 2, 3, 4]),
])
def test_sequence_windows_cover_the_rollout(kind, firsts):
    buf = _filled()
    assert buf.sequence_starts(3, kind).tolist() == firsts
    assert buf.sequence_starts(4, "fifty_percent_overlap").tolist() == [0, 2, 3]
    assert buf.sequence_starts(4, "maximum").tolist() == [0, 1, 2, 3]
    assert buf.sequence_starts(4, "chunked").tolist() == [0, 4]


def test_unknown_sequence_type_is_refused():
    with pytest.raises(ValueError, match="bptt_sequence_type 'sliding'"):
        _filled().sequences(3, "sliding")


def test_chunked_sequences_pad_mask_starts_and_initial_states():
    seq = _filled().sequences(3, "chunked")
    # sequences are ordered (first step, sub-env): (0,e0) (0,e1) (3,e0) (3,e1) (6,e0) (6,e1)
    assert seq["obs"].shape == (3, 6, 1)
    assert seq["obs"][:, 0, 0].tolist() == [0, 1, 2]
    assert seq["obs"][:, 3, 0].tolist() == [13, 14, 15]
    # the last chunk holds one step; the rest is padding, masked out
    assert seq["mask"][:, 4].tolist() == [True, False, False]
    # env 0's autoreset step (t = 3) is invalid; the episode restarts at t = 4
    assert seq["mask"][:, 2].tolist() == [False, True, True]
    assert seq["starts"][:, 2].tolist() == [True, True, False]  # after ended t=2, after t=3
    assert not seq["starts"][:, 3].any()
    # each sequence starts from the state stored at its first step
    assert seq["hidden"]["encoder"][:, 0, 0].tolist() == [0, 0, 3, 3, 6, 6]


def test_whole_rollout_when_the_sequence_is_longer():
    seq = _filled().sequences(100, "maximum")
    assert seq["obs"].shape == (7, 2, 1)
    assert seq["mask"].sum() == 13
