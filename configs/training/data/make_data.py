"""Regenerate the small data files the example manifests use (deterministic).

* ``blobs_features.csv`` / ``blobs_targets.csv``: a contextual-bandit dataset: 300 contexts
  of 4 features drawn around 3 class centres; the arm to pull is the class.
* ``cartpole_random.h5``: 4 000 CartPole-v1 transitions from a uniformly random policy, in
  the flat offline-RL layout (``observations``, ``actions``, ``rewards``, ``terminals``,
  ``episode_terminals``) read by ``environment.dataset_path``.

Run: ``python configs/training/data/make_data.py`` (needs numpy, gymnasium and h5py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def make_blobs(rows: int = 300, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    centres = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    targets = rng.integers(0, len(centres), size=rows)
    features = centres[targets] + rng.normal(scale=0.35, size=(rows, centres.shape[1]))
    header = "f0,f1,f2,f3"
    np.savetxt(HERE / "blobs_features.csv", features, delimiter=",", header=header,
               comments="", fmt="%.5f")
    np.savetxt(HERE / "blobs_targets.csv", targets, delimiter=",", header="target",
               comments="", fmt="%d")


def make_cartpole(transitions: int = 4000, seed: int = 0) -> None:
    import gymnasium as gym
    import h5py

    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    columns: dict[str, list] = {k: [] for k in ("observations", "actions", "rewards",
                                                "terminals", "episode_terminals")}
    for _ in range(transitions):
        action = int(rng.integers(0, 2))
        next_obs, reward, terminated, truncated, _ = env.step(action)
        columns["observations"].append(obs)
        columns["actions"].append(action)
        columns["rewards"].append(reward)
        columns["terminals"].append(float(terminated))
        columns["episode_terminals"].append(float(terminated or truncated))
        obs = env.reset()[0] if terminated or truncated else next_obs
    with h5py.File(HERE / "cartpole_random.h5", "w") as out:
        out.create_dataset("observations", data=np.asarray(columns["observations"], np.float32))
        out.create_dataset("actions", data=np.asarray(columns["actions"], np.int32))
        for key in ("rewards", "terminals", "episode_terminals"):
            out.create_dataset(key, data=np.asarray(columns[key], np.float32))
        out.create_dataset("discrete_action", data=True)


if __name__ == "__main__":
    make_blobs()
    make_cartpole()
