"""HPO tests use the algorithm tests' small networks and single-threaded torch, and one
batch of DQN transitions on the probe env's one-dimensional observations."""

import numpy as np

from tests.algorithms.conftest import SMALL_NET, small_net  # noqa: F401


def dqn_batch(seed: int = 0, rows: int = 32) -> dict[str, np.ndarray]:
    """Random DQN transitions (observation width 1, two actions)."""
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(rows, 1)).astype(np.float32),
            "action": rng.integers(0, 2, size=rows),
            "reward": rng.normal(size=rows).astype(np.float32),
            "next_obs": rng.normal(size=(rows, 1)).astype(np.float32),
            "done": rng.random(rows) < 0.2}
