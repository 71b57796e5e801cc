"""Learning, shown: CQN on the shipped random CartPole dataset, the bandits on iris.

CQN threshold: the dataset was collected by a uniformly random policy; its mean episode
return (computed from the file's episode ends, about 22) is what behaviour cloning of it
can reach, since cloning a random policy gives a random policy. CQN must reach at least
three times that (mean of its last four evaluations), which no policy close to the data's
gets, so the Q-learning part of CQN, not imitation, is what is shown.

Bandits: NeuralUCB and NeuralTS on the reference's iris tables reach a greedy accuracy of
at least 0.9 (fitness over ``eval_steps`` greedy pulls), and their regret grows
sub-linearly: the last quarter of the pulls costs at most half the regret of the first.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agilerl.training.trainer import LocalTrainer

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[3] / "shared" / "peer-manifests" / "data"
CARTPOLE_RANDOM = DATA / "data" / "cartpole" / "cartpole_random_v1.1.0.h5"
IRIS = DATA / "tests" / "data"


def behaviour_return(path: Path) -> float:
    """Mean episode return of the policy that collected an HDF5 dataset."""
    import h5py

    with h5py.File(path, "r") as handle:
        rewards = np.asarray(handle["rewards"], dtype=np.float64)
        ends = np.asarray(handle["episode_terminals"]) != 0
    ends[-1] = True
    return float(np.add.reduceat(rewards, np.r_[0, np.flatnonzero(ends)[:-1] + 1]).mean())


@pytest.mark.skipif(not CARTPOLE_RANDOM.is_file(), reason="shared peer data not present")
def test_cqn_beats_the_random_behaviour_policy_threefold() -> None:
    pytest.importorskip("h5py")
    baseline = behaviour_return(CARTPOLE_RANDOM)
    assert 15 < baseline < 30  # a random CartPole policy
    manifest = {
        "algorithm": {"name": "CQN", "batch_size": 256, "lr": 1e-3, "double": True,
                      "tau": 0.005, "gamma": 0.99, "cql_alpha": 1.0},
        "environment": {"name": "CartPole-v1", "num_envs": 8,
                        "dataset_path": str(CARTPOLE_RANDOM)},
        "network": {"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
                    "head_config": {"hidden_size": [64]}},
        "replay_buffer": {"max_size": 100_000},
        "training": {"max_steps": 8000, "evo_steps": 1000, "pop_size": 1},
    }
    population, _ = LocalTrainer.from_manifest(manifest=manifest, seed=0).train(verbose=False)
    last = float(np.mean(population[0].fitness[-4:]))
    assert last >= 3 * baseline, (population[0].fitness, baseline)


@pytest.mark.skipif(not IRIS.is_dir(), reason="shared peer data not present")
@pytest.mark.parametrize(("algo", "lr"), [("NeuralUCB", 1e-3), ("NeuralTS", 3e-3)])
def test_bandit_on_iris_reaches_90_percent_with_sublinear_regret(algo: str, lr: float) -> None:
    pulls, eval_steps = 3000, 500
    manifest = {
        "algorithm": {"name": algo, "batch_size": 64, "lr": lr, "learn_step": 2},
        "environment": {"name": "IRIS", "features": str(IRIS / "iris_features.csv"),
                        "targets": str(IRIS / "iris_targets.csv")},
        "network": {"latent_dim": 128, "encoder_config": {"hidden_size": [128]},
                    "head_config": {"hidden_size": [128]}},
        "replay_buffer": {"max_size": 10_000},
        "training": {"max_steps": pulls, "evo_steps": pulls // 3, "pop_size": 1,
                     "eval_steps": eval_steps},
    }
    population, fitnesses = LocalTrainer.from_manifest(manifest=manifest, seed=0).train(
        verbose=False)
    assert fitnesses[0] / eval_steps >= 0.9
    regret = np.asarray(population[0].regret)
    quarter = pulls // 4
    first, last = regret[quarter] - regret[0], regret[pulls] - regret[pulls - quarter]
    assert last <= 0.5 * first, regret[::quarter]
