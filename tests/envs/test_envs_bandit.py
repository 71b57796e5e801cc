"""Bandit envs: dataset mode (tables and files), entrypoint mode, errors."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from agilerl.envs import BanditEnv, load_table, make_bandit_env

pd = pytest.importorskip("pandas")

FEATURES = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]
TARGETS = ["b", "a", "c", "a"]


def _tables() -> tuple[object, object]:
    return pd.DataFrame(FEATURES, columns=["x", "y"]), pd.DataFrame({"target": TARGETS})


def test_dataset_from_tables_context_layout_and_reward() -> None:
    features, targets = _tables()
    env = make_bandit_env(SimpleNamespace(features=features, targets=targets), seed=0)
    assert isinstance(env, BanditEnv)
    assert env.arms == 3 and env.num_envs == 1
    assert env.single_action_space.n == 3
    assert env.single_observation_space.shape == (6,)
    context = env.reset()
    assert context.dtype == np.float32 and context.shape == (3, 6)
    row = context[0, :2]
    assert row.tolist() in FEATURES
    for arm in range(3):  # the sample's features sit in the arm's own block only
        block = context[arm].reshape(3, 2)
        assert np.array_equal(block[arm], row)
        assert not np.delete(block, arm, axis=0).any()
    # arms are the sorted target labels; only the sample's own label pays
    rewards = []
    for arm in range(3):
        context = env.reset(seed=5)
        rewards.append(env.step(arm)[1])
    label = TARGETS[FEATURES.index(context[0, :2].tolist())]
    assert rewards == [1.0 if arm == "abc".index(label) else 0.0 for arm in range(3)]


def test_same_seed_same_contexts() -> None:
    features, targets = _tables()
    runs = []
    for _ in range(2):
        env = BanditEnv(features, targets, seed=3)
        runs.append([env.reset()] + [env.step(0)[0] for _ in range(5)])
    assert all(np.array_equal(a, b) for a, b in zip(*runs, strict=True))


def test_dataset_from_csv_and_h5_files(tmp_path: Path) -> None:
    features, targets = _tables()
    features.to_csv(tmp_path / "f.csv", index=False)
    targets.to_csv(tmp_path / "t.csv", index=False)
    env = make_bandit_env(
        SimpleNamespace(features=str(tmp_path / "f.csv"), targets=str(tmp_path / "t.csv"))
    )
    assert env.arms == 3 and env.reset().shape == (3, 6)

    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "f.h5", "w") as handle:
        handle["features"] = np.array(FEATURES)
    assert np.array_equal(load_table(tmp_path / "f.h5"), np.array(FEATURES))


def test_unsupported_suffix_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Unsupported file type '.txt'"):
        load_table(tmp_path / "f.txt")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_table(tmp_path / "missing.csv")


def test_features_without_targets_fails_at_build() -> None:
    features, _ = _tables()
    with pytest.raises(ValueError, match="Both 'features' and 'targets' are required"):
        make_bandit_env(SimpleNamespace(features=features, targets=None))
    with pytest.raises(ValueError, match="requires either"):
        make_bandit_env(SimpleNamespace())


def test_entrypoint_mode(tmp_path: Path) -> None:
    (tmp_path / "my_bandit.py").write_text(
        "class Env:\n    def __init__(self, arms=2):\n        self.arms = arms\n"
    )
    spec = SimpleNamespace(entrypoint="my_bandit:Env", path=str(tmp_path), config={"arms": 7})
    assert make_bandit_env(spec).arms == 7
