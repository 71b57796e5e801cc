"""LocalTrainer: construction, training DQN/PPO end to end, seeds, resume, elite, early stop."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from agilerl.checkpoint import CheckpointError
from agilerl.training.trainer import LocalTrainer, UnsupportedAlgorithmError

from .conftest import (
    assert_same_learning_rates,
    assert_same_weights,
    manifest_trainer,
    run_and_resume,
    weights,
)


def test_defaults_from_names():
    trainer = LocalTrainer(algorithm="DQN", environment="CartPole-v1")
    import agilerl.models as models

    assert isinstance(trainer.algorithm_spec, models.DQNSpec)
    assert isinstance(trainer.env_spec, models.GymEnvSpec)
    assert trainer.device == "cpu"
    assert len(trainer.population) == 1
    assert trainer.memory is not None and trainer.mutations is None
    assert trainer.selection_strategy is None
    assert trainer.env.single_observation_space.shape == (4,)


def test_unimplemented_algorithm_refused_at_construction(monkeypatch):
    from .test_algorithm_wiring import hide_implementation

    hide_implementation(monkeypatch, "MADDPG")
    with pytest.raises(UnsupportedAlgorithmError, match="not implemented yet"):
        LocalTrainer(algorithm="MADDPG", environment="simple_spread_v3")


def test_unknown_kwarg_and_deprecated_tournament():
    import agilerl.models as models

    with pytest.raises(TypeError, match="'tournamnet'"):
        LocalTrainer("DQN", "CartPole-v1", tournamnet=None)
    spec = models.TournamentSelectionSpec(tournament_size=2)
    with pytest.warns(DeprecationWarning, match="'tournament' argument"):
        trainer = LocalTrainer("DQN", "CartPole-v1", tournament=spec)
    assert trainer.selection_strategy_spec is spec
    with pytest.raises(ValueError, match="conflicting selection strategies"), \
            pytest.warns(DeprecationWarning):
        LocalTrainer("DQN", "CartPole-v1", tournament=spec,
                     selection_strategy=models.TournamentSelectionSpec(tournament_size=3))


def test_hpo_flag_adds_default_operators():
    trainer = LocalTrainer("PPO", "CartPole-v1", hpo=True)
    assert trainer.mutations is not None and trainer.selection_strategy is not None
    assert trainer.memory is None


def test_from_manifest_honours_device_and_round_trips(tiny_dqn):
    trainer = LocalTrainer.from_manifest(manifest=tiny_dqn, device="cpu", seed=0)
    assert trainer.device == "cpu"
    assert len(trainer.population) == 3
    manifest = trainer.to_manifest()
    assert manifest["algorithm"]["name"] == "DQN"
    assert manifest["training"]["pop_size"] == 3
    again = LocalTrainer.from_manifest(manifest=manifest, seed=0)
    assert again.to_manifest() == manifest


@pytest.mark.parametrize("fixture", ["tiny_dqn", "tiny_ppo"])
def test_trains_end_to_end(fixture, request):
    manifest = request.getfixturevalue(fixture)
    trainer = LocalTrainer.from_manifest(manifest=manifest, seed=1)
    population, fitnesses = trainer.train(verbose=False)
    assert len(population) == len(fitnesses) == manifest["training"]["pop_size"]
    assert all(math.isfinite(f) for f in fitnesses)
    assert all(a.steps[-1] >= manifest["training"]["max_steps"] for a in population)


def test_same_seed_same_run(tiny_dqn):
    runs = []
    for _ in range(2):
        trainer = LocalTrainer.from_manifest(manifest=tiny_dqn, seed=7)
        runs.append(trainer.train(verbose=False))
    assert runs[0][1] == runs[1][1]
    assert_same_weights(runs[0][0], runs[1][0])
    other = LocalTrainer.from_manifest(manifest=tiny_dqn, seed=8).train(verbose=False)
    assert not torch.equal(_flat(other[0]), _flat(runs[0][0]))


def _flat(population) -> torch.Tensor:
    return torch.cat([t.flatten().float() for member in weights(population)
                      for state in member.values() for t in state.values()])


@pytest.mark.parametrize("fixture", ["tiny_dqn", "tiny_ppo"])
def test_resume_from_checkpoint_is_exact(fixture, request, tmp_path):
    manifest = request.getfixturevalue(fixture)
    evo = manifest["training"]["evo_steps"]
    pop = manifest["training"]["pop_size"]
    full = LocalTrainer.from_manifest(manifest=manifest, seed=5)
    full_pop, full_fit = full.train(verbose=False, checkpoint_steps=evo,
                                    checkpoint_path=tmp_path / "ck")
    checkpoints = sorted((tmp_path / "ck").iterdir())
    assert len(checkpoints) >= 2
    first = checkpoints[0]  # written after generation 1
    assert (first / "index.json").is_file() and len(list(first.glob("member_*.pt"))) == pop

    resumed = LocalTrainer.from_manifest(manifest=manifest, seed=5,
                                         resume_from_checkpoint=first)
    res_pop, res_fit = resumed.train(verbose=False)
    assert res_fit == full_fit
    assert_same_weights(full_pop, res_pop)


def test_folder_without_index_is_rejected(tiny_dqn, tmp_path):
    folder = tmp_path / "half-written"
    folder.mkdir()
    (folder / "member_0.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="no index.json"):
        LocalTrainer.from_manifest(manifest=tiny_dqn, resume_from_checkpoint=folder)


def test_checkpoint_of_another_population_is_rejected(tiny_dqn, tmp_path):
    LocalTrainer.from_manifest(manifest=tiny_dqn, seed=1).train(
        verbose=False, checkpoint_steps=200, checkpoint_path=tmp_path / "ck")
    tiny_dqn["training"]["pop_size"] = 2
    with pytest.raises(CheckpointError, match="pop_size"):
        LocalTrainer.from_manifest(manifest=tiny_dqn, resume_from_checkpoint=tmp_path / "ck")


def test_elite_is_saved_and_acts(tiny_dqn, tmp_path):
    from agilerl.algorithms import DQN

    trainer = LocalTrainer.from_manifest(manifest=tiny_dqn, seed=2)
    _, fitnesses = trainer.train(verbose=False, save_elite=True,
                                 elite_path=tmp_path / "best.pt")
    assert trainer.last_elite_path == tmp_path / "best.pt"
    agent = DQN.load(tmp_path / "best.pt")
    obs = np.zeros((3, 4), dtype=np.float32)
    action = agent.get_action(obs)
    assert action.shape == (3,) and set(action.tolist()) <= {0, 1}
    # an agent file can also seed a new population
    again = LocalTrainer.from_manifest(manifest=tiny_dqn,
                                       resume_from_checkpoint=tmp_path / "best.pt")
    assert [a.index for a in again.population] == [0, 1, 2]


def test_target_score_stops_early(tiny_dqn):
    tiny_dqn["training"].update(max_steps=100_000, evo_steps=100, target_score=1.0)
    tiny_dqn.pop("mutation")
    trainer = LocalTrainer.from_manifest(manifest=tiny_dqn, seed=3)
    population, _ = trainer.train(verbose=False)
    # every evaluation scores >= 1 on CartPole, so the 3-generation window closes at once
    assert all(a.steps[-1] == 300 for a in population)


def test_manifest_checkpoint_settings_apply_unless_overridden(tiny_dqn, tmp_path):
    tiny_dqn["training"].update(checkpoint_steps=200, checkpoint_path=str(tmp_path / "m"),
                                overwrite_checkpoints=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        LocalTrainer.from_manifest(manifest=tiny_dqn, seed=1).train(verbose=False)
    kept = list((tmp_path / "m").iterdir())
    assert len(kept) == 1, "overwrite keeps only the latest checkpoint"


def test_base_trainer_hooks_are_abstract():
    from agilerl.training.trainer import Trainer

    with pytest.raises(NotImplementedError, match="_resolve_env_spec"):
        Trainer("DQN", "CartPole-v1")

    class Named(Trainer):
        def _resolve_env_spec(self, environment):
            return environment

    with pytest.raises(NotImplementedError, match="train method"):
        Named("DQN", "CartPole-v1").train()


@pytest.mark.parametrize("training", [{}, {"num_workers": 2}, {"batched_updates": True}],
                         ids=["in-process", "workers", "batched"])
def test_anneal_lr_follows_each_members_budget_and_resumes_exactly(tiny_ppo, training, tmp_path):
    tiny_ppo["algorithm"]["anneal_lr"] = True
    tiny_ppo["training"].update(training)
    run = run_and_resume(manifest_trainer(tiny_ppo, seed=5), tmp_path, checkpoint_steps=128)
    assert_same_learning_rates(run.full_pop, run.pop)
    learn_step, budget = 64, tiny_ppo["training"]["max_steps"]
    for agent in run.pop:
        assert agent.lr == 1e-3  # the schedule scales lr; it never rewrites it
        # the last update came after all but the last rollout of the member's steps
        last = (agent.steps[-1] - learn_step) / budget
        assert agent.optimizers["optimizer"].param_groups[0]["lr"] == pytest.approx(1e-3 * (1 - last))
