"""``LocalTrainer`` behaviours the reference's trainer tests check, on real (tiny) builds
rather than mocks: string names, ``to_manifest``, ``train`` keyword arguments, the
deprecated ``tournament=`` spelling."""

from __future__ import annotations

import pytest

from agilerl.models import (
    DQNSpec,
    GymEnvSpec,
    MlpSpec,
    QNetworkSpec,
    ReplayBufferSpec,
    TournamentSelectionSpec,
    TrainingSpec,
)
from agilerl.training.trainer import LocalTrainer

TRAINING = TrainingSpec(max_steps=500, evo_steps=250, pop_size=1, eval_steps=20)


def test_string_algorithm_and_environment() -> None:
    trainer = LocalTrainer(algorithm="DQN", environment="CartPole-v1", training=TRAINING,
                           replay_buffer=ReplayBufferSpec(max_size=1000))
    assert isinstance(trainer.algorithm_spec, DQNSpec)
    assert isinstance(trainer.env_spec, GymEnvSpec) and trainer.env_spec.name == "CartPole-v1"


def test_to_manifest_is_a_plain_mapping_without_unset_sections() -> None:
    trainer = LocalTrainer(algorithm="PPO", environment=GymEnvSpec(name="CartPole-v1"),
                           training=TRAINING)
    manifest = trainer.to_manifest()
    assert manifest["algorithm"]["name"] == "PPO" and manifest["training"]["max_steps"] == 500
    assert "replay_buffer" not in manifest and "mutation" not in manifest


def test_to_manifest_includes_the_network() -> None:
    spec = DQNSpec(net_config=QNetworkSpec(encoder_config=MlpSpec(hidden_size=[64]),
                                           head_config=MlpSpec(hidden_size=[64])))
    trainer = LocalTrainer(algorithm=spec, environment=GymEnvSpec(name="CartPole-v1"),
                           training=TRAINING, replay_buffer=ReplayBufferSpec(max_size=1000))
    network = trainer.to_manifest()["network"]
    assert network["encoder_config"]["hidden_size"] == [64]
    assert network["head_config"]["hidden_size"] == [64]


def test_train_keyword_arguments_land_on_the_training_spec(tmp_path) -> None:
    trainer = LocalTrainer(algorithm="PPO", environment=GymEnvSpec(name="CartPole-v1",
                                                                   num_envs=2),
                           training=TRAINING.model_copy(), seed=1)
    population, fitnesses = trainer.train(
        verbose=False, checkpoint_steps=250, checkpoint_path=tmp_path / "ck",
        overwrite_checkpoints=True, save_elite=True, elite_path=tmp_path / "elite")
    spec = trainer.training_spec
    assert (spec.checkpoint_steps, spec.checkpoint_path, spec.overwrite_checkpoints) == (
        250, str(tmp_path / "ck"), True)
    assert len(population) == 1 and len(fitnesses) == 1
    assert (tmp_path / "elite.pt").is_file()


def test_deprecated_tournament_keyword_warns_and_routes() -> None:
    selection = TournamentSelectionSpec(tournament_size=2)
    with pytest.warns(DeprecationWarning, match="tournament"):
        trainer = LocalTrainer(algorithm="PPO", environment="CartPole-v1",
                               training=TrainingSpec(max_steps=500, evo_steps=250, pop_size=2),
                               tournament=selection)
    assert trainer.selection_strategy_spec == selection
    with pytest.raises(TypeError, match="unexpected"):
        LocalTrainer(algorithm="PPO", environment="CartPole-v1", no_such_option=1)


@pytest.mark.parametrize(("algorithm", "field", "env"), [("DQN", "actor_network", "CartPole-v1"),
                                                         ("DDPG", "critic_network", "Pendulum-v1")])
def test_a_custom_network_module_is_refused_by_name(algorithm: str, field: str, env: str) -> None:
    # Members are built from the network section; a module would otherwise be dropped.
    import torch

    import agilerl.models as models
    from agilerl.core.errors import UnsupportedAlgorithmError

    spec = getattr(models, f"{algorithm}Spec")(**{field: torch.nn.Linear(4, 2)})
    with pytest.raises(UnsupportedAlgorithmError,
                       match=f"algorithm.{field} = <Linear>: custom network modules are not"):
        LocalTrainer(algorithm=spec, environment=env, training=TRAINING)
