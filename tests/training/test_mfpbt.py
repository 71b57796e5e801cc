"""MF-PBT in LocalTrainer: construction, applying a plan through the seam, CLI, resume."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import warnings

import pytest
import torch
import yaml

import agilerl.models as models
from agilerl.hpo.multi_frequency import MultiFrequencySelection
from agilerl.population import LocalPopulation
from agilerl.training.evolution import LocalEvolution
from agilerl.training.trainer import LocalTrainer

from .conftest import TINY_DQN, manifest_trainer, run_and_resume, runs_with_same_seed
from .test_train_cli import _env

MF = {"strategy": "multi_frequency", "n_subpopulations": 2, "evolution_frequency_ratios": [1, 2]}


@pytest.fixture
def tiny_mf() -> dict:
    """6 DQN members in 2 subpopulations of 3 (1 winner, 1 open, 1 loser), 4 generations."""
    manifest = copy.deepcopy(TINY_DQN)
    manifest["selection_strategy"] = dict(MF)
    manifest["training"].update(pop_size=6, max_steps=400, evo_steps=100)
    return manifest


def test_trainer_builds_mf_operator_and_tags_subpopulations(tiny_mf):
    tiny_mf["training"]["pop_size"] = 8
    tiny_mf["selection_strategy"]["evolution_frequency_ratios"] = None
    trainer = LocalTrainer.from_manifest(manifest=tiny_mf, seed=0)
    assert isinstance(trainer.selection_strategy, MultiFrequencySelection)
    assert [a.subpopulation_id for a in trainer.population] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [a.index for a in trainer.population] == list(range(8))
    spec = trainer.selection_strategy_spec
    assert (spec.n_winners, spec.n_survivors, spec.n_open_for_migration, spec.n_losers) == \
        (1, 0, 1, 2)
    assert trainer.selection_strategy.evolution_frequency_ratios == [1, 5]
    out = trainer.to_manifest()["selection_strategy"]
    assert out["strategy"] == "multi_frequency" and out["n_losers"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert trainer.tournament_selection is None
        assert trainer.tournament_selection_spec is None


def test_programmatic_spec_is_resolved_or_refused(tiny_mf):
    spec = models.MultiFrequencySelectionSpec(strategy="multi_frequency")
    trainer = LocalTrainer("DQN", "CartPole-v1", training=models.TrainingSpec(pop_size=6),
                           mutation=models.MutationSpec(rand_seed=3),
                           replay_buffer=models.ReplayBufferSpec(max_size=1000),
                           selection_strategy=spec, seed=0)
    assert (spec.n_winners, spec.n_open_for_migration, spec.n_losers) == (1, 1, 1)
    assert trainer.selection_strategy.population_size == 6
    with pytest.raises(ValueError, match="pop_size is required"):
        LocalTrainer("DQN", "CartPole-v1", selection_strategy=models.MultiFrequencySelectionSpec(
            strategy="multi_frequency"))
    with pytest.raises(ValueError, match="population_size must be >= 6"):
        LocalTrainer("DQN", "CartPole-v1", training=models.TrainingSpec(pop_size=4),
                     selection_strategy=models.MultiFrequencySelectionSpec(
                         strategy="multi_frequency"))


def test_mf_seed_comes_from_mutation_rand_seed(tiny_mf):
    a = LocalTrainer.from_manifest(manifest=tiny_mf, seed=1).selection_strategy
    b = LocalTrainer.from_manifest(manifest=tiny_mf, seed=2).selection_strategy
    assert a.rng.bit_generator.state == b.rng.bit_generator.state
    tiny_mf["mutation"]["rand_seed"] = 4
    c = LocalTrainer.from_manifest(manifest=tiny_mf, seed=1).selection_strategy
    assert c.rng.bit_generator.state != a.rng.bit_generator.state


def _pointers(agent) -> list[int]:
    out = [p.data_ptr() for net in agent.networks.values() for p in net.parameters()]
    for optimizer in agent.optimizers.values():
        for state in optimizer.state.values():
            out += [t.data_ptr() for t in state.values() if torch.is_tensor(t) and t.dim() > 0]
    return out


def _flat(agent) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for net in agent.networks.values()
                      for p in net.parameters()])


class _Recorder:
    """A mutation operator that records which members it was asked to mutate."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def mutation(self, population, pre_training_mut=False, indices=None):
        self.calls.append(sorted(indices))
        return population


def test_plan_is_applied_through_the_seam(tiny_mf):
    trainer = LocalTrainer.from_manifest(manifest=tiny_mf, seed=3)
    trainer.train(verbose=False)  # optimizer state in every member
    backend = LocalPopulation(trainer.population, trainer.env, train_member=None)
    for slot, agent in enumerate(backend.agents):  # tell members apart by hyperparameters
        agent.set_hyperparameter("lr", 1e-3 * (slot + 1))
    before = [_flat(a).clone() for a in backend.agents]
    selection = trainer.selection_strategy
    selection.counters = [0, 1]  # both subpopulations evolve in the next step
    recorder = _Recorder()
    # subpop 0: slots 0,1,2 ranked 0 > 1 > 2; subpop 1: 3 > 4 > 5, all weaker than slot 0
    elite = LocalEvolution(recorder, selection).evolve(
        backend, [50.0, 40.0, 30.0, 20.0, 10.0, math.nan])
    agents = backend.agents
    assert elite == 0
    assert [a.index for a in agents] == list(range(6))
    assert recorder.calls == [[2, 5]]  # the winner copies, and nothing else
    # winners are untouched; slot 1 (open, 40) beats every outsider and stays
    for slot in (0, 1, 3):
        assert torch.equal(_flat(agents[slot]), before[slot])
    # losers <- their subpopulation's winner, whole (the NaN member 5 included)
    assert torch.equal(_flat(agents[2]), before[0]) and agents[2].lr == pytest.approx(1e-3)
    assert torch.equal(_flat(agents[5]), before[3]) and agents[5].lr == pytest.approx(4e-3)
    # open slot 4 (10) <- best outsider, slot 0 of the faster subpopulation: its weights,
    # with the hyperparameters of subpopulation 1's best member (slot 3), in the optimizer too
    assert torch.equal(_flat(agents[4]), before[0])
    assert agents[4].lr == pytest.approx(4e-3)
    assert all(g["lr"] == pytest.approx(4e-3) for o in agents[4].optimizers.values()
               for g in o.param_groups)
    pointers = [p for agent in agents for p in _pointers(agent)]
    assert len(pointers) == len(set(pointers)), "two members share a tensor"


def test_mutation_touches_only_the_listed_members(tiny_mf):
    tiny_mf["mutation"]["probabilities"] = {"no_mut": 0.0, "arch_mut": 0.0, "new_layer": 0.0,
                                            "params_mut": 1.0, "act_mut": 0.0,
                                            "rl_hp_mut": 0.0}
    trainer = LocalTrainer.from_manifest(manifest=tiny_mf, seed=3)
    backend = LocalPopulation(trainer.population, trainer.env, train_member=None)
    before = [_flat(a).clone() for a in backend.agents]
    backend.apply_mutation(trainer.mutations, members=[4, 1])
    changed = [i for i, a in enumerate(backend.agents) if not torch.equal(_flat(a), before[i])]
    assert changed == [1, 4]
    assert [a.mut for a in backend.agents] == ["None", "param", "None", "None", "param", "None"]


def test_mf_run_same_seed_same_result(tiny_mf):
    runs = runs_with_same_seed(manifest_trainer(tiny_mf, seed=2))
    assert [a.subpopulation_id for a in runs[0][0]] == [0, 0, 0, 1, 1, 1]


def test_resume_from_checkpoint_is_exact(tiny_mf, tmp_path):
    # the first checkpoint is written after generation 1, when subpopulation 1 (ratio 2)
    # has not evolved yet: its counter is 1
    run = run_and_resume(manifest_trainer(tiny_mf, seed=5), tmp_path, checkpoint_steps=100)
    assert len(run.checkpoints) >= 3
    assert [a.subpopulation_id for a in run.pop] == [0, 0, 0, 1, 1, 1]
    assert run.resumed.selection_strategy.counters == run.full.selection_strategy.counters


def test_cli_trains_mf_manifest(tiny_mf, tmp_path):
    path = tmp_path / "mf.yaml"
    path.write_text(yaml.safe_dump(tiny_mf, sort_keys=False))
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(path), "--no-verbose", "--seed", "1",
         "--run-dir", str(run_dir), "--save-elite", "training.max_steps=300"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 3
    resolved = yaml.safe_load((run_dir / "manifest.yaml").read_text())
    assert resolved["selection_strategy"]["strategy"] == "multi_frequency"
    assert resolved["selection_strategy"]["n_losers"] == 1
    assert (run_dir / "elite.pt").is_file()


def test_checkpoint_of_another_selection_strategy_is_rejected(tiny_mf, tmp_path):
    from agilerl.checkpoint import CheckpointError

    LocalTrainer.from_manifest(manifest=tiny_mf, seed=1).train(
        verbose=False, checkpoint_steps=400, checkpoint_path=tmp_path / "ck")
    tiny_mf["selection_strategy"] = {"tournament_size": 2, "elitism": True}
    with pytest.raises(CheckpointError, match="selection_strategy"):
        LocalTrainer.from_manifest(manifest=tiny_mf, resume_from_checkpoint=tmp_path / "ck")
    tiny_mf["selection_strategy"] = {"strategy": "multi_frequency", "n_subpopulations": 3,
                                     "evolution_frequency_ratios": [1, 2, 3]}
    tiny_mf["training"]["pop_size"] = 9
    tiny_mf["selection_strategy"].update(n_winners=1, n_open_for_migration=1, n_losers=1)
    with pytest.raises(CheckpointError, match="2 subpopulation counters"):
        LocalTrainer.from_manifest(manifest=tiny_mf, resume_from_checkpoint=tmp_path / "ck")
