"""The Ray backend on a real local two-node Ray cluster: same members as the sequential
backend for the same seed, lost actors re-created, placement on distinct nodes."""

from __future__ import annotations

import copy
import os
import time
from typing import Any

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")

from agilerl.population.ray_cluster import NAMESPACE, PLACEMENT_GROUP_ENV  # noqa: E402
from agilerl.training.trainer import LocalTrainer  # noqa: E402

pytestmark = pytest.mark.ray

MUTATION = {"probabilities": {"no_mut": 0.2, "arch_mut": 0.2, "new_layer": 0.2,
                              "params_mut": 0.2, "act_mut": 0.2, "rl_hp_mut": 0.2}}
SELECTION = {"tournament_size": 2, "elitism": True}


def ppo(pop_size: int = 3, max_steps: int = 512) -> dict[str, Any]:
    return {"algorithm": {"name": "PPO", "learn_step": 64, "batch_size": 32},
            "environment": {"name": "CartPole-v1", "num_envs": 2},
            "training": {"max_steps": max_steps, "evo_steps": 128, "pop_size": pop_size,
                         "eval_steps": 50},
            "mutation": MUTATION, "tournament_selection": SELECTION}


def dqn(pop_size: int = 3, max_steps: int = 600) -> dict[str, Any]:
    return {"algorithm": {"name": "DQN", "batch_size": 32, "learn_step": 2},
            "environment": {"name": "CartPole-v1", "num_envs": 2},
            "training": {"max_steps": max_steps, "evo_steps": 200, "pop_size": pop_size,
                         "learning_delay": 50, "eval_steps": 50},
            "replay_buffer": {"max_size": 500},
            "mutation": MUTATION, "tournament_selection": SELECTION}


def same(a: Any, b: Any) -> bool:
    """Bit-for-bit equality of nested states (tensors, arrays, containers, scalars)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return bool(a == b)


def _train(manifest: dict[str, Any], **kwargs: Any) -> tuple[list[Any], list[float], Any]:
    trainer = LocalTrainer.from_manifest(manifest, seed=3)
    population, fitnesses = trainer.train(verbose=False, **kwargs)
    return [a.get_state() for a in population], fitnesses, trainer


@pytest.mark.slow
@pytest.mark.parametrize("through", ["gcs", "client", "auto"])
def test_ppo_with_evolution_on_ray_equals_the_sequential_run(ray_cluster, through,
                                                             monkeypatch):
    address = {"gcs": ray_cluster.address, "client": ray_cluster.client_address,
               "auto": "auto"}[through]
    if through == "auto":  # the cluster this machine belongs to, as `ray start` leaves it
        monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    local = _train(ppo())
    remote = _train(ppo(), backend="ray", ray_address=address)
    assert remote[1] == local[1]
    assert same(remote[0], local[0])
    assert not ray.is_initialized()  # the backend disconnects what it connected


def test_ppo_with_anneal_lr_on_ray_equals_the_sequential_run(ray_cluster):
    # the schedule follows each member's budget, which the actors read from the run's spec
    manifest = ppo()
    manifest["algorithm"]["anneal_lr"] = True
    local = _train(copy.deepcopy(manifest))
    remote = _train(copy.deepcopy(manifest), backend="ray", ray_address=ray_cluster.address)
    assert remote[1] == local[1]
    assert same(remote[0], local[0])
    assert not same(local[0], _train(ppo())[0])  # the schedule changed the run


def test_dqn_with_evolution_and_shared_memory_on_ray_equals_the_sequential_run(ray_cluster):
    local = _train(dqn())
    remote = _train(dqn(), backend="ray", ray_address=ray_cluster.address)
    assert remote[1] == local[1]
    assert same(remote[0], local[0])
    assert same(remote[2].memory.state_dict(), local[2].memory.state_dict())


def test_run_events_on_ray_are_those_of_the_sequential_run(ray_cluster, tmp_path):
    """Issue 22: members mutate in Ray actors, and the operator brings its records back,
    so the run's events.jsonl tells what the sequential run's does (times aside)."""
    from agilerl.logging.events import read_events

    _train(dqn(), run_dir=tmp_path / "local")
    _train(dqn(), backend="ray", ray_address=ray_cluster.address, run_dir=tmp_path / "ray")

    def story(folder: Any) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.items() if k != "time"} for e in read_events(folder)]

    local = story(tmp_path / "local")
    assert [e for e in local if e["event"] == "mutation" and e["kind"] != "none"]
    assert story(tmp_path / "ray") == local


def _backend(manifest: dict[str, Any], address: str) -> Any:
    """A Ray backend over a fresh trainer's members, as a training session builds it."""
    from agilerl.population.backends import BackendSettings, PopulationSetup, make_backend
    from agilerl.training.paradigms import MemberTrainerFactory

    trainer = LocalTrainer.from_manifest(manifest, seed=3)
    setup = PopulationSetup(
        agents=trainer.population, env=trainer.env, env_factory=trainer.env_builder(),
        member_trainer_factory=MemberTrainerFactory(trainer.paradigm),
        training_spec=trainer.training_spec, algorithm_spec=trainer.algorithm_spec,
        paradigm=trainer.paradigm, memory=trainer.memory,
        eval_steps=trainer.training_spec.eval_steps, seed=trainer.seed)
    return make_backend(setup, BackendSettings(backend="ray", ray_address=address))


def _kill(actor: Any) -> None:
    """Kill ``actor`` and return once it is gone: ``ray.kill`` only asks, and calls made
    before its process ends can still succeed (then nothing would be lost to test)."""
    ray.kill(actor, no_restart=True)
    for _ in range(600):
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError("the killed Ray actor still answers after a minute")


@pytest.mark.parametrize("make", [ppo, pytest.param(dqn, marks=pytest.mark.slow)])
def test_a_lost_actor_is_recreated_from_its_members_last_state(ray_cluster, make):
    import warnings

    from agilerl.population.backend import EvalJob, TrainJob

    jobs = [TrainJob(m, 128, 100 + m) for m in range(4)]
    again = [TrainJob(m, 128, 200 + m) for m in range(4)]
    evals = [EvalJob(m, 300 + m) for m in range(4)]

    def generations(backend: Any, kill: bool) -> tuple[list[float], list[Any], Any]:
        assert len(backend._actors) == 2  # members 1 and 3 share actor 1
        list(backend.train_members(jobs))
        backend.end_training_phase()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if kill:  # its process dies between two calls: the next call finds it gone
                _kill(backend._actors[1])
            list(backend.train_members(again))
            backend.end_training_phase()
            if kill:  # again, while both its members are to be evaluated
                _kill(backend._actors[1])
            fitnesses = backend.evaluate_members(evals)
        lost = [w for w in caught if "re-creating it from their last states" in str(w.message)]
        assert len(lost) == (2 if kill else 0), [str(w.message) for w in caught]
        return fitnesses, [backend.get_state(m) for m in range(4)], backend.memory_state()

    reference = _backend(make(pop_size=4), ray_cluster.address)
    try:
        expected = generations(reference, kill=False)
    finally:
        reference.close()
    backend = _backend(make(pop_size=4), ray_cluster.address)
    try:
        assert same(generations(backend, kill=True), expected)
    finally:
        backend.close()


def test_a_reserved_placement_group_puts_one_actor_on_each_node(ray_cluster, monkeypatch):
    from ray.util import placement_group, remove_placement_group

    ray.init(address=ray_cluster.address, namespace=NAMESPACE, logging_level="ERROR")
    try:
        group = placement_group([{"CPU": 1}] * 2, strategy="STRICT_SPREAD", name="two-nodes")
        ray.get(group.ready(), timeout=60)
        monkeypatch.setitem(os.environ, PLACEMENT_GROUP_ENV, "two-nodes")
        backend = _backend(ppo(pop_size=4), ray_cluster.address)
        try:
            nodes = backend.actor_nodes()
            assert len(nodes) == 2 and len(set(nodes)) == 2  # one actor on each node
        finally:
            backend.close()
        remove_placement_group(group)
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_multi_frequency_pbt_on_ray_equals_the_sequential_run(ray_cluster):
    manifest = dqn(pop_size=6, max_steps=400)
    manifest["training"]["evo_steps"] = 100
    del manifest["tournament_selection"]
    manifest["selection_strategy"] = {"strategy": "multi_frequency", "n_subpopulations": 2,
                                      "evolution_frequency_ratios": [1, 2]}
    local = _train(manifest)
    remote = _train(manifest, backend="ray", ray_address=ray_cluster.address)
    assert remote[1] == local[1]
    assert same(remote[0], local[0])
    assert same(remote[2].memory.state_dict(), local[2].memory.state_dict())
