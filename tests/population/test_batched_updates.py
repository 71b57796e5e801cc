"""training.batched_updates: members learn together, with the results of a sequential run."""

from __future__ import annotations

import copy

import pytest
import torch

from agilerl.core.errors import UnsupportedSettingError
from agilerl.population import lockstep
from agilerl.population.backends import BackendSettings, PopulationSetup, make_backend
from agilerl.training.trainer import LocalTrainer
from tests.training.conftest import TINY_DQN, TINY_PPO, assert_same_weights, weights
from tests.training.test_image_runs import PPO_CNN

#: Four same-architecture members whose lr and batch size mutate (the groups stay whole).
SAME_ARCH = copy.deepcopy(TINY_DQN)
SAME_ARCH["mutation"]["probabilities"] = {"no_mut": 0.2, "arch_mut": 0.0, "new_layer": 0.0,
                                          "params_mut": 0.0, "act_mut": 0.0, "rl_hp_mut": 0.8}
SAME_ARCH["training"]["pop_size"] = 4

#: PPO that has no batched update: recurrent (an lstm encoder).
RECURRENT_PPO = copy.deepcopy(TINY_PPO)
RECURRENT_PPO["algorithm"]["recurrent"] = True
RECURRENT_PPO["network"] = {"latent_dim": 16, "head_config": {"hidden_size": [16]},
                            "encoder_config": {"arch": "lstm", "hidden_state_size": 8}}

#: Architecture mutations split the population into groups that change every generation.
MUTATING = copy.deepcopy(TINY_DQN)
MUTATING["training"]["pop_size"] = 4
MUTATING["mutation"]["rand_seed"] = 5  # a draw whose architecture mutations regroup members


def _train(manifest: dict, batched: bool, **options) -> tuple[list, list[float]]:
    manifest = copy.deepcopy(manifest)
    manifest["training"]["batched_updates"] = batched
    # The unbatched side trains members one after the other in this process (the default
    # would start worker processes, which do not see a monkeypatched method).
    manifest["training"].setdefault("num_workers", 1)
    trainer = LocalTrainer.from_manifest(manifest=manifest, seed=11)
    return trainer.train(verbose=False, **options)


def _assert_close(a: list, b: list) -> None:
    for wa, wb in zip(weights(a), weights(b), strict=True):
        for net in wa:
            for key in wa[net]:
                torch.testing.assert_close(wa[net][key], wb[net][key], rtol=1e-4, atol=1e-5,
                                           msg=f"{net}.{key}")


class PhaseGroups(list):
    """The group sizes of every batched training phase (a list per phase), and whether
    each group computed its gradient in closed form (``closed_form``, in the same shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_form: list[list[bool]] = []


@pytest.fixture
def phase_groups(monkeypatch) -> PhaseGroups:
    """The groups of every batched training phase, recorded as the run goes."""
    seen = PhaseGroups()
    build = lockstep._learners

    def recording(agents):
        learners = build(agents)
        groups = sorted({id(g): g for g, _ in learners.values()}.values(),
                        key=lambda g: len(g.agents))
        seen.append([len(g.agents) for g in groups])
        seen.closed_form.append([getattr(g, "chain", None) is not None for g in groups])
        return learners

    monkeypatch.setattr(lockstep, "_learners", recording)
    return seen


@pytest.mark.parametrize("double", [True, False], ids=["double", "dqn"])
def test_batched_run_equals_the_sequential_run(phase_groups, double):
    manifest = copy.deepcopy(SAME_ARCH)
    manifest["algorithm"]["double"] = double
    pop_seq, fit_seq = _train(manifest, batched=False)
    pop_bat, fit_bat = _train(manifest, batched=True)
    assert phase_groups == [[4]] * 3  # every phase learned as one group of four
    assert phase_groups.closed_form == [[True]] * 3
    assert {a.hyperparameters["batch_size"] for a in pop_bat} != {32}  # batch sizes mutated
    assert fit_bat == pytest.approx(fit_seq)
    assert [a.hyperparameters for a in pop_seq] == [a.hyperparameters for a in pop_bat]
    assert [a.steps for a in pop_seq] == [a.steps for a in pop_bat]
    _assert_close(pop_seq, pop_bat)


def test_architecture_mutations_regroup_the_members(phase_groups):
    pop_seq, fit_seq = _train(MUTATING, batched=False)
    pop_bat, fit_bat = _train(MUTATING, batched=True)
    assert len(phase_groups) == 3 and len({tuple(g) for g in phase_groups}) > 1
    assert any(max(groups) > 1 for groups in phase_groups)
    # a group of several members learned in closed form
    assert any(size > 1 and closed
               for sizes, flags in zip(phase_groups, phase_groups.closed_form, strict=True)
               for size, closed in zip(sizes, flags, strict=True))
    assert fit_bat == pytest.approx(fit_seq)
    assert [a.mut for a in pop_seq] == [a.mut for a in pop_bat]
    _assert_close(pop_seq, pop_bat)


def resume_batched_run_exactly(manifest: dict, tmp_path) -> tuple:
    """Train ``manifest`` batched with checkpoints, resume it from the first one and check
    the resumed run ends as the whole one did; returns (the batched manifest, that
    checkpoint, the whole run's population and fitnesses)."""
    full_pop, full_fit = _train(manifest, batched=True, checkpoint_steps=200,
                                checkpoint_path=tmp_path / "ck")
    first = sorted((tmp_path / "ck").iterdir())[0]
    manifest = copy.deepcopy(manifest)
    manifest["training"]["batched_updates"] = True
    resumed = LocalTrainer.from_manifest(manifest=manifest, seed=11,
                                         resume_from_checkpoint=first)
    res_pop, res_fit = resumed.train(verbose=False)
    assert res_fit == full_fit
    assert_same_weights(full_pop, res_pop)
    return manifest, first, full_pop, full_fit


def test_a_batched_run_resumes_exactly(tmp_path):
    manifest, first, full_pop, full_fit = resume_batched_run_exactly(SAME_ARCH, tmp_path)
    # the checkpoint is an ordinary one: it resumes unbatched too
    manifest["training"]["batched_updates"] = False
    unbatched = LocalTrainer.from_manifest(manifest=manifest, seed=11,
                                           resume_from_checkpoint=first)
    un_pop, un_fit = unbatched.train(verbose=False)
    assert un_fit == pytest.approx(full_fit)
    _assert_close(full_pop, un_pop)


def _setup(manifest: dict) -> PopulationSetup:
    manifest = copy.deepcopy(manifest)
    manifest["training"]["batched_updates"] = True
    trainer = LocalTrainer.from_manifest(manifest=manifest, seed=0)
    from agilerl.training.paradigms import MemberTrainerFactory

    return PopulationSetup(agents=trainer.population, env=trainer.env,
                           env_factory=trainer.env_builder(),
                           member_trainer_factory=MemberTrainerFactory(trainer.paradigm),
                           training_spec=trainer.training_spec, paradigm=trainer.paradigm,
                           memory=trainer.memory)


@pytest.mark.parametrize(("manifest", "settings", "named"), [
    (TINY_DQN, BackendSettings(num_workers=2, batched_updates=True), "worker processes"),
    (TINY_DQN, BackendSettings(backend="ray", batched_updates=True), "backend = 'ray'"),
    (RECURRENT_PPO, BackendSettings(batched_updates=True), "PPO has no batched update"),
    (PPO_CNN, BackendSettings(batched_updates=True), "PPO has no batched update"),
], ids=["workers", "ray", "recurrent-ppo", "cnn-ppo"])
def test_unbatchable_runs_are_refused_naming_the_field(manifest, settings, named):
    with pytest.raises(UnsupportedSettingError, match="training.batched_updates") as error:
        make_backend(_setup(manifest), settings)
    assert named in str(error.value)


def test_the_field_reaches_the_backend():
    settings = BackendSettings.from_training(_setup(TINY_DQN).training_spec)
    assert settings.batched_updates is True
    backend = make_backend(_setup(TINY_DQN), settings)
    assert isinstance(backend, lockstep.LockstepPopulation) and backend.batches_updates()


def test_members_keep_their_own_torch_random_stream(monkeypatch, phase_groups):
    """Exploration drawing from torch's process-wide generator (as a noisy policy would):
    lockstep members interleave, so each needs its own stream to match the sequential run."""
    from agilerl.algorithms.dqn import DQN

    greedy = DQN.explore_action

    def torch_noisy(self, obs, vector_step, settings=None):
        actions = greedy(self, obs, vector_step, settings)
        flip = torch.rand(len(actions)).numpy() < 0.3
        return (actions + flip) % self.num_actions

    monkeypatch.setattr(DQN, "explore_action", torch_noisy)
    pop_seq, fit_seq = _train(SAME_ARCH, batched=False)
    pop_bat, fit_bat = _train(SAME_ARCH, batched=True)
    assert phase_groups == [[4]] * 3
    assert fit_bat == pytest.approx(fit_seq)
    _assert_close(pop_seq, pop_bat)


def test_the_cli_refuses_batched_updates_with_workers(tmp_path):
    import yaml

    from tests.cli.test_cli import agilerl, assert_no_traceback

    manifest = tmp_path / "tiny_dqn.yaml"
    manifest.write_text(yaml.safe_dump(TINY_DQN, sort_keys=False))
    result = agilerl("train", str(manifest), "training.batched_updates=true",
                     "--workers", "2", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "training.batched_updates" in result.stdout + result.stderr
    assert_no_traceback(result)


def test_offline_cqn_members_learn_together(tmp_path, phase_groups):
    pytest.importorskip("h5py")
    from tests.training.test_offline_bandit_runs import cqn_manifest, write_cartpole_hdf5

    manifest = cqn_manifest(write_cartpole_hdf5(tmp_path / "cartpole.h5"))
    manifest["mutation"]["probabilities"] = SAME_ARCH["mutation"]["probabilities"]
    manifest["training"]["pop_size"] = 4
    pop_seq, fit_seq = _train(manifest, batched=False)
    pop_bat, fit_bat = _train(manifest, batched=True)
    assert phase_groups == [[4]] * 3
    assert phase_groups.closed_form == [[True]] * 3
    assert len({a.hyperparameters["cql_alpha"] for a in pop_bat}) > 1  # mutated per member
    assert fit_bat == pytest.approx(fit_seq)
    assert [a.steps for a in pop_seq] == [a.steps for a in pop_bat]
    _assert_close(pop_seq, pop_bat)


def test_mutated_members_regroup_and_their_groups_equal_learn_calls():
    """After an architecture and activation mutations, members with equal networks form a
    group again, each group learns in closed form, and equals one learn per member."""
    import numpy as np

    from tests.algorithms.test_stacked_update import (
        _assert_close,
        _batch,
        _members,
        mutate_alike_and_regroup,
    )

    alone, together = _members(double=True), _members(double=True)
    groups = mutate_alike_and_regroup(alone, together)
    assert sorted(len(g.agents) for g in groups) == [1, 1, 2]
    assert all(g.chain is not None for g in groups)
    rng = np.random.default_rng(0)
    for _ in range(3):
        batches = [_batch(rng, a.batch_size) for a in together]
        for group in groups:
            index = [together.index(a) for a in group.agents]
            got = group.learn(range(len(index)), [batches[i] for i in index])
            expected = [alone[i].learn(batches[i]) for i in index]
            assert [m["loss"] for m in got] == pytest.approx([m["loss"] for m in expected],
                                                            rel=1e-5)
    for a, b in zip(alone, together, strict=True):
        _assert_close(a, b)
