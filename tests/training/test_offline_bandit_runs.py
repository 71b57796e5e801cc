"""Offline CQN and the neural bandits through the trainer: the same seed gives the same run,
a run resumed from a checkpoint equals the uninterrupted one (mutations and selection
included), the bandits take in-memory tables and log regret and accuracy."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agilerl.training.trainer import LocalTrainer

from .conftest import assert_same_weights, manifest_trainer, run_and_resume

h5py = pytest.importorskip("h5py")

MUTATION = {
    "probabilities": {"no_mut": 0.1, "arch_mut": 0.3, "new_layer": 0.5, "params_mut": 0.2,
                      "act_mut": 0.1, "rl_hp_mut": 0.3},
    "rand_seed": 3,
}
NETWORK = {"latent_dim": 16, "encoder_config": {"hidden_size": [16]},
           "head_config": {"hidden_size": [16]}}


def write_cartpole_hdf5(path: Path, rows: int = 600, seed: int = 0) -> Path:
    """Random-policy CartPole-v1 transitions in the reference's flat HDF5 layout."""
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    obs_rows, actions, rewards, terminals, ends = [], [], [], [], []
    obs, _ = env.reset(seed=seed)
    while len(actions) < rows:
        action = int(rng.integers(2))
        nxt, reward, terminated, truncated, _ = env.step(action)
        obs_rows.append(obs)
        actions.append(action)
        rewards.append(reward)
        terminals.append(terminated)
        ends.append(terminated or truncated)
        obs = env.reset()[0] if terminated or truncated else nxt
    env.close()
    with h5py.File(path, "w") as handle:
        handle["observations"] = np.asarray(obs_rows, dtype=np.float32)
        handle["actions"] = np.asarray(actions, dtype=np.int32)
        handle["rewards"] = np.asarray(rewards, dtype=np.float32)
        handle["terminals"] = np.asarray(terminals, dtype=np.float32)
        handle["episode_terminals"] = np.asarray(ends, dtype=np.float32)
    return path


@pytest.fixture(scope="module")
def cartpole_h5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cartpole_hdf5(tmp_path_factory.mktemp("data") / "cartpole.h5")


def cqn_manifest(dataset: Path) -> dict:
    return {
        "algorithm": {"name": "CQN", "batch_size": 32, "lr": 1e-3, "double": True,
                      "tau": 0.01},
        "environment": {"name": "CartPole-v1", "num_envs": 2, "dataset_path": str(dataset)},
        "network": NETWORK,
        "mutation": {**MUTATION, "rl_hp_selection": {"lr": {"min": 1e-4, "max": 1e-2},
                                                     "cql_alpha": {"min": 0.1, "max": 5.0}}},
        "selection_strategy": {"tournament_size": 2, "elitism": True},
        "replay_buffer": {"max_size": 5000},
        "training": {"max_steps": 150, "evo_steps": 50, "pop_size": 3, "eval_steps": 40},
    }


def iris_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Iris-like tables: three separable classes of four features (no file involved)."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 30)
    centres = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    features = centres[labels] + rng.normal(0, 0.3, (len(labels), 4))
    return (pd.DataFrame(features, columns=["a", "b", "c", "d"]),
            pd.DataFrame({"class": labels}))


def bandit_trainer(algo: str, seed: int, probabilities: dict | None = None,
                   **kwargs: object) -> LocalTrainer:
    features, targets = iris_tables()
    return LocalTrainer(
        _models().ALGO_REGISTRY[algo](batch_size=16, lr=3e-3, learn_step=1),
        {"name": "IRIS", "features": features, "targets": targets},
        training={"max_steps": 120, "evo_steps": 40, "pop_size": 3, "eval_steps": 30},
        mutation=_models().MutationSpec.model_validate({
            **MUTATION, "probabilities": probabilities or MUTATION["probabilities"],
            "rl_hp_selection": {"lamb": {"min": 0.1, "max": 10.0},
                                "reg": {"min": 1e-5, "max": 1e-2}}}),
        selection_strategy=_models().TournamentSelectionSpec(tournament_size=2),
        replay_buffer=_models().ReplayBufferSpec(max_size=1000),
        seed=seed, **kwargs)


def _models():
    import agilerl.models as models

    return models


def _same_members(a: list, b: list) -> None:
    assert_same_weights(a, b)
    for x, y in zip(a, b, strict=True):
        assert x.hyperparameters == y.hyperparameters
        assert x.steps == y.steps and x.fitness == y.fitness
        if hasattr(x, "regret"):
            assert x.regret == y.regret
            np.testing.assert_array_equal(x.design_inv, y.design_inv)


# ---------------------------------------------------------------------------- CQN
def test_cqn_counts_updates_and_resumes_exactly(cartpole_h5: Path, tmp_path: Path) -> None:
    run = run_and_resume(manifest_trainer(cqn_manifest(cartpole_h5), seed=5), tmp_path,
                         checkpoint_steps=50)
    assert [agent.steps[-1] for agent in run.full_pop] == [150, 150, 150]  # gradient updates
    assert any(agent.mut != "None" for agent in run.full_pop)
    assert len(run.checkpoints) == 3
    _same_members(run.full_pop, run.pop)


def test_cqn_dataset_that_is_a_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="is a folder, expected a file") as caught:
        LocalTrainer.from_manifest(manifest=cqn_manifest(tmp_path))
    assert "not found" not in str(caught.value)


def test_cqn_resume_refuses_a_different_dataset(cartpole_h5: Path, tmp_path: Path) -> None:
    from agilerl.checkpoint import CheckpointError

    manifest = cqn_manifest(cartpole_h5)
    manifest["training"].update(max_steps=50, pop_size=2)
    manifest.pop("mutation")
    manifest.pop("selection_strategy")
    LocalTrainer.from_manifest(manifest=copy.deepcopy(manifest), seed=1).train(
        verbose=False, checkpoint_steps=50, checkpoint_path=tmp_path / "ck")
    other = write_cartpole_hdf5(tmp_path / "other.h5", seed=9)
    changed = copy.deepcopy(manifest)
    changed["environment"]["dataset_path"] = str(other)
    checkpoint = next((tmp_path / "ck").iterdir())
    with pytest.raises(CheckpointError, match="different dataset|does not fit"):
        LocalTrainer.from_manifest(manifest=changed, seed=1, resume_from_checkpoint=checkpoint)


# ---------------------------------------------------------------------------- bandits
@pytest.mark.parametrize("algo", ["NeuralUCB", "NeuralTS"])
def test_bandit_resumes_exactly_with_lamb_and_reg_mutations(algo: str, tmp_path: Path) -> None:
    # every member's mutation is a lamb or reg one, so the resumed run has them
    hp_only = {"no_mut": 0.0, "arch_mut": 0.0, "new_layer": 0.0, "params_mut": 0.0,
               "act_mut": 0.0, "rl_hp_mut": 1.0}
    run = run_and_resume(lambda **kwargs: bandit_trainer(algo, seed=4, probabilities=hp_only,
                                                         **kwargs),
                         tmp_path, checkpoint_steps=40)
    pop = run.full_pop
    _same_members(pop, run.pop)
    assert all(len(agent.regret) == 121 for agent in pop)  # one entry per pull, plus 0
    assert any((a.lamb, a.reg) != (1.0, 0.000625) for a in pop)  # lamb/reg were mutated


def test_bandit_generation_metrics_carry_regret_and_accuracy(tmp_path: Path) -> None:
    trainer = bandit_trainer("NeuralUCB", seed=1)
    trainer.train(verbose=False, run_dir=tmp_path / "run")
    metrics = pd.read_csv(next((tmp_path / "run").glob("*.csv")))
    for column in ("train/mean_regret", "train/mean_accuracy", "train/agent_0/regret",
                   "train/agent_0/accuracy"):
        assert column in metrics.columns
    # Cumulative regret of the member in slot 0: at most one per pull it has made (its
    # lineage's pulls; selection may put a copy of another member in that slot).
    regret, pulls = metrics["train/agent_0/regret"], metrics["train/agent_0/local_steps"]
    assert ((regret >= 0) & (regret <= pulls)).all() and regret.iloc[-1] > 0
    assert metrics["train/mean_accuracy"].between(0, 1).all()


def test_lamb_mutation_gives_the_design_of_the_same_pulls() -> None:
    trainer = bandit_trainer("NeuralUCB", seed=2)
    agent = trainer.population[0]
    env = trainer.env
    context = env.reset(seed=0)
    for _ in range(20):
        context, _ = env.step(agent.get_action(context))
    agent.set_hyperparameter("lamb", 3.0)
    width = len(agent.gram)
    np.testing.assert_allclose(agent.design_inv,
                               np.linalg.inv(3.0 * np.eye(width) + agent.gram), atol=1e-10)


def test_settings_these_loops_do_not_read_are_named(cartpole_h5: Path) -> None:
    manifest = cqn_manifest(cartpole_h5)
    manifest["training"].update(learning_delay=1000, max_steps=10, evo_steps=10, pop_size=1)
    with pytest.warns(UserWarning, match="training.learning_delay = 1000 has no effect"):
        LocalTrainer.from_manifest(manifest=manifest, seed=0).train(verbose=False)
    trainer = bandit_trainer("NeuralTS", seed=0)
    trainer.training_spec.episode_steps = 100
    trainer.training_spec.max_steps = trainer.training_spec.evo_steps = 10
    with pytest.warns(UserWarning, match="training.episode_steps = 100 has no effect"):
        trainer.train(verbose=False)
