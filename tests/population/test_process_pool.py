"""Members in workers (training.num_workers > 1: the driver's own thread and N - 1 worker
processes): the same run as one process."""

from __future__ import annotations

import copy
import multiprocessing

import numpy as np
import pytest

from agilerl.population.pool import MemberWorkerError, ProcessPopulation
from agilerl.training.trainer import LocalTrainer
from tests.training.conftest import TINY_DQN, TINY_PPO, assert_same_weights
from tests.training.test_rainbow_training import TINY_RAINBOW

PER_DQN = copy.deepcopy(TINY_RAINBOW)
PER_DQN["replay_buffer"]["max_size"] = 500  # the shared ring wraps during the run


def _train(manifest: dict, **options) -> tuple[LocalTrainer, list, list[float]]:
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(manifest), seed=11)
    population, fitnesses = trainer.train(verbose=False, **options)
    return trainer, population, fitnesses


@pytest.mark.parametrize("manifest", [TINY_DQN, TINY_PPO], ids=["dqn", "ppo"])
def test_two_workers_give_the_sequential_run_bit_for_bit(manifest):
    one, pop_one, fit_one = _train(manifest, num_workers=1)
    two, pop_two, fit_two = _train(manifest, num_workers=2)
    assert fit_one == fit_two
    assert_same_weights(pop_one, pop_two)
    assert [a.steps for a in pop_one] == [a.steps for a in pop_two]
    assert [a.hyperparameters for a in pop_one] == [a.hyperparameters for a in pop_two]
    assert [a.mut for a in pop_one] == [a.mut for a in pop_two]
    assert len({a.mut for a in pop_one}) > 1 or manifest is TINY_PPO  # evolution happened
    if one.memory is not None:
        a, b = one.memory.state_dict(), two.memory.state_dict()
        assert (a["pos"], a["size"], a["counter"]) == (b["pos"], b["size"], b["counter"])
        for name in a["data"]:
            assert np.array_equal(a["data"][name], b["data"][name]), name


@pytest.mark.slow
def test_prioritized_n_step_memory_is_shared_identically():
    one, pop_one, fit_one = _train(PER_DQN, num_workers=1)
    two, pop_two, fit_two = _train(PER_DQN, num_workers=2)
    assert fit_one == fit_two
    assert_same_weights(pop_one, pop_two)
    assert np.array_equal(one.memory._tree, two.memory._tree)


@pytest.mark.slow
def test_resume_across_backends(tmp_path):
    _, full_pop, full_fit = _train(TINY_DQN, checkpoint_steps=200,
                                   checkpoint_path=tmp_path / "ck", num_workers=2)
    first = sorted((tmp_path / "ck").iterdir())[0]
    resumed = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_DQN), seed=11,
                                         resume_from_checkpoint=first)
    res_pop, res_fit = resumed.train(verbose=False, num_workers=1)
    assert res_fit == full_fit
    assert_same_weights(full_pop, res_pop)


def test_a_worker_that_dies_names_the_member(monkeypatch):
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_PPO), seed=3)
    built = []
    original = ProcessPopulation.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        built.append(self)
        self._workers[1].process.kill()  # member 1 trains there

    monkeypatch.setattr(ProcessPopulation, "__init__", spy)
    with pytest.raises(MemberWorkerError) as raised:
        trainer.train(verbose=False, num_workers=2)
    message = str(raised.value)
    assert "member 1 of generation 0" in message and "killed by SIGKILL" in message
    assert all(not w.process.is_alive() for w in built[0]._workers)


class _LocalEnv:
    """An env given as an object whose factory cannot be pickled (a lambda inside)."""

    def __init__(self) -> None:
        import gymnasium as gym

        self.build = lambda: gym.make_vec("CartPole-v1", num_envs=2)

    def make_env(self):
        return self.build()


def test_an_env_that_cannot_reach_workers_is_refused_with_the_setting_named():
    from agilerl.core.errors import TrainingSetupError
    from agilerl.models import ALGO_REGISTRY, TrainingSpec

    spec = ALGO_REGISTRY["PPO"](learn_step=32, num_envs=2)
    trainer = LocalTrainer(spec, _LocalEnv(), seed=0,
                           training=TrainingSpec(max_steps=64, evo_steps=32, pop_size=2))
    with pytest.raises(TrainingSetupError, match="training.num_workers = 2: the environment"):
        trainer.train(verbose=False, num_workers=2)


def _other_paradigms() -> list:
    from tests.training import test_ippo_runs, test_maddpg_runs

    return [pytest.param(test_maddpg_runs._manifest("MATD3"), id="matd3-joint-memory"),
            pytest.param(test_ippo_runs._manifest("tournament"), id="ippo")]


@pytest.mark.parametrize("manifest", _other_paradigms())
def test_two_workers_give_the_sequential_run_for_multi_agent_loops(manifest):
    _, pop_one, fit_one = _train(manifest, num_workers=1)
    _, pop_two, fit_two = _train(manifest, num_workers=2)
    assert fit_one == fit_two
    assert_same_weights(pop_one, pop_two)


def test_two_workers_give_the_sequential_run_for_bandits():
    from tests.training.test_offline_bandit_runs import _same_members, bandit_trainer

    one = bandit_trainer("NeuralUCB", seed=5).train(verbose=False, num_workers=1)
    two = bandit_trainer("NeuralUCB", seed=5).train(verbose=False, num_workers=2)
    assert one[1] == two[1]
    _same_members(one[0], two[0])


#: Trains the tiny DQN manifest with 2 workers in a fresh interpreter (whose only thread is
#: its main thread, whatever threads earlier tests left running) and prints the parent pid
#: of every worker process, this process's pid, and whether a fork is refused once another
#: thread runs.
_FORK_CHECK = """
import copy, os, threading
from agilerl.population import pool
from agilerl.population.pool import ProcessPopulation
from agilerl.training.trainer import LocalTrainer
from tests.training.conftest import TINY_DQN

assert threading.active_count() == 1
assert pool._can_fork_here("cpu") and not pool._can_fork_here("cuda:0")
parents = []
original = ProcessPopulation._spawn

def spy(ctx, index):
    worker = original(ctx, index)
    with open(f"/proc/{worker.process.pid}/stat") as fh:
        parents.append(int(fh.read().rsplit(")", 1)[1].split()[1]))
    return worker

ProcessPopulation._spawn = staticmethod(spy)
LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_DQN), seed=3).train(
    verbose=False, num_workers=2)
release = threading.Event()
other = threading.Thread(target=release.wait)
other.start()
refused = not pool._can_fork_here("cpu")  # a fork server then
release.set()
other.join()
print(parents, os.getpid(), refused)
"""


def test_workers_fork_from_the_driver_unless_another_thread_runs():
    import ast
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _FORK_CHECK], cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(repo)},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    parents, pid, refused = done.stdout.strip().splitlines()[-1].rsplit(" ", 2)
    # two workers: the driver's thread and one process, forked from the driver
    assert ast.literal_eval(parents) == [int(pid)]
    assert refused == "True"


@pytest.mark.parametrize("in_memory_rows", [5000, 100], ids=["in-memory", "memory-mapped"])
def test_an_offline_dataset_reaches_workers_by_its_files(tmp_path, in_memory_rows):
    import pickle

    from agilerl.population.pool import _for_workers
    from tests.training.test_offline_bandit_runs import (
        _same_members,
        cqn_manifest,
        write_cartpole_hdf5,
    )

    manifest = cqn_manifest(write_cartpole_hdf5(tmp_path / "cartpole.h5"))
    manifest["replay_buffer"]["max_size"] = in_memory_rows  # above: kept in RAM; below: files
    one, pop_one, fit_one = _train(manifest, num_workers=1)
    two, pop_two, fit_two = _train(manifest, num_workers=2)
    assert fit_one == fit_two
    _same_members(pop_one, pop_two)
    handle = _for_workers(two.memory)  # what each worker was sent
    assert len(pickle.dumps(handle)) < 1000 < len(pickle.dumps(one.memory))
    assert two.memory.state_dict() == one.memory.state_dict()  # the checkpoint's record
    reopened = handle.open_here()
    assert not reopened._obs.flags.writeable
    ours, theirs = (m.sample(64, np.random.default_rng(0)) for m in (reopened, one.memory))
    for name, rows in theirs.items():
        np.testing.assert_array_equal(ours[name], rows)


def _watch_layout(monkeypatch) -> list[dict]:
    """Record, for each pool built, its worker processes, its threads and who trained whom."""
    import threading

    seen: list[dict] = []
    original_init, original_train = ProcessPopulation.__init__, ProcessPopulation.train_members

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        seen.append({"children": [c.pid for c in multiprocessing.active_children()],
                     "threads": [t.name for t in threading.enumerate()],
                     "workers": [w.process.pid for w in self._workers], "trained_on": set()})

    def train_members(self, jobs, **kwargs):
        for member, report in original_train(self, jobs, **kwargs):
            seen[-1]["trained_on"].add(self._workers[self._holder[member]].process.pid)
            yield member, report

    monkeypatch.setattr(ProcessPopulation, "__init__", init)
    monkeypatch.setattr(ProcessPopulation, "train_members", train_members)
    return seen


@pytest.mark.parametrize("workers", [2, 3])
def test_n_workers_are_the_driver_and_n_minus_one_processes_with_the_same_result(
        monkeypatch, workers):
    import os

    manifest = copy.deepcopy(TINY_DQN)
    manifest["training"]["pop_size"] = 4
    _, pop_one, fit_one = _train(manifest, num_workers=1)
    seen = _watch_layout(monkeypatch)
    _, pop_n, fit_n = _train(manifest, num_workers=workers)
    (layout,) = seen
    assert len(layout["children"]) == workers - 1  # no other process of the run
    assert layout["workers"].count(os.getpid()) == 1  # one worker is the driver itself
    assert "agilerl-member-worker-0" in layout["threads"]
    assert os.getpid() in layout["trained_on"] and len(layout["trained_on"]) == workers
    assert fit_one == fit_n
    assert_same_weights(pop_one, pop_n)
    import threading

    assert "agilerl-member-worker-0" not in [t.name for t in threading.enumerate()]


def test_the_drivers_worker_thread_failing_names_the_member(monkeypatch):
    from agilerl.population import pool_worker

    original = pool_worker._Worker.train

    def train(self, member, *args):
        if member == 0:  # member 0 trains on the driver's thread (worker 0)
            raise RuntimeError("the member's env broke")
        return original(self, member, *args)

    monkeypatch.setattr(pool_worker._Worker, "train", train)
    trainer = LocalTrainer.from_manifest(manifest=copy.deepcopy(TINY_DQN), seed=3)
    with pytest.raises(MemberWorkerError) as raised:
        trainer.train(verbose=False, num_workers=2)
    message = str(raised.value)
    assert "member 0 of generation 0" in message and "driver's worker thread" in message
    assert "the member's env broke" in message
