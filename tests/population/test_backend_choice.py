"""Choosing a population backend: manifest fields, CLI flags, the registration hook."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from agilerl.core.errors import MissingExtraError, TrainingSetupError
from agilerl.models import TrainingSpec
from agilerl.population import LocalPopulation, backends
from agilerl.population.backends import BackendSettings, PopulationSetup, make_backend

REPO = Path(__file__).resolve().parents[2]


def _setup(members: int = 2) -> PopulationSetup:
    return PopulationSetup(agents=[object()] * members, env=None, env_factory=lambda: None,
                           member_trainer_factory=lambda context: None,
                           training_spec=TrainingSpec())


def test_training_section_holds_the_backend_fields():
    spec = TrainingSpec(num_workers=2, backend="ray", ray_address="auto")
    assert (spec.num_workers, spec.backend, spec.ray_address) == (2, "ray", "auto")
    default = TrainingSpec()
    assert (default.num_workers, default.backend, default.ray_address) == (0, "local", None)
    with pytest.raises(ValueError, match="backend"):
        TrainingSpec(backend="dask")
    with pytest.raises(ValueError, match="num_workers"):
        TrainingSpec(num_workers=-1)


def test_the_manifest_default_and_an_unset_field_both_mean_automatic():
    assert BackendSettings.from_training(TrainingSpec()).num_workers == 0
    assert BackendSettings.from_training(SimpleNamespace()).num_workers == 0


def test_arguments_override_the_manifest_settings():
    training = TrainingSpec(num_workers=3, backend="local", ray_address="auto")
    assert BackendSettings.from_training(training) == BackendSettings("local", 3, "auto")
    chosen = BackendSettings.from_training(training, backend="ray", num_workers=1,
                                           ray_address="ray://head:10001")
    assert chosen == BackendSettings("ray", 1, "ray://head:10001")


def test_worker_count_is_capped_by_the_population_and_zero_means_one_per_core(monkeypatch):
    assert BackendSettings(num_workers=8).workers_for(3) == 3
    assert BackendSettings(num_workers=0).workers_for(1000) == len(os.sched_getaffinity(0))
    assert BackendSettings(num_workers=1).workers_for(5) == 1
    assert BackendSettings().num_workers == backends.AUTO_WORKERS == 0
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert BackendSettings().workers_for(8) == 4
    assert BackendSettings().workers_for(8, threads_per_worker=2) == 2
    assert BackendSettings().workers_for(1) == 1  # one member: in this process
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert BackendSettings().workers_for(8) == 1  # one core: in this process


def test_the_default_falls_back_to_this_process_where_workers_cannot_run(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    llm_like = _setup()
    llm_like.worker_processes = False
    assert isinstance(make_backend(llm_like, BackendSettings()), LocalPopulation)
    unpicklable = _setup()
    unpicklable.agents = [SimpleNamespace(steps=[0]) for _ in range(2)]
    unpicklable.env_factory = lambda: None  # a lambda cannot be sent to a worker
    assert isinstance(make_backend(unpicklable, BackendSettings()), LocalPopulation)
    import multiprocessing
    import time

    picklable = _setup()
    picklable.agents = unpicklable.agents
    picklable.env_factory = time.time  # builds nothing, but reaches a worker
    picklable.member_trainer_factory = bool
    from agilerl.population.pool import ProcessPopulation

    pool = make_backend(picklable, BackendSettings())
    try:
        assert isinstance(pool, ProcessPopulation) and len(pool._workers) == 2
    finally:
        pool.close()
    envs_in_processes = multiprocessing.get_context("fork").Process(target=time.sleep,
                                                                     args=(60,), daemon=True)
    envs_in_processes.start()  # as an async vector env's sub-env workers would be
    try:
        assert isinstance(make_backend(picklable, BackendSettings()), LocalPopulation)
    finally:
        envs_in_processes.kill()
        envs_in_processes.join()
    from agilerl.population.pool import WorkersUnavailable

    with pytest.raises(WorkersUnavailable, match="training.num_workers = 2: the environment"):
        make_backend(unpicklable, BackendSettings(num_workers=2))


def test_one_worker_trains_in_this_process():
    backend = make_backend(_setup(), BackendSettings(num_workers=1))
    assert isinstance(backend, LocalPopulation)


def test_ray_backend_without_ray_names_the_extra(monkeypatch):
    monkeypatch.delitem(backends._REGISTRY, "ray", raising=False)
    monkeypatch.setitem(sys.modules, "ray", None)  # importing it raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'agilerl\[ray\]'"):
        make_backend(_setup(), BackendSettings(backend="ray"))


def test_a_registered_backend_is_built_from_setup_and_settings(monkeypatch):
    seen = []

    def factory(setup, settings):
        seen.append((setup, settings))
        return SimpleNamespace(kind="registered")

    monkeypatch.setitem(backends._REGISTRY, "ray", factory)
    setup, settings = _setup(), BackendSettings(backend="ray", ray_address="auto")
    assert make_backend(setup, settings).kind == "registered"
    assert seen == [(setup, settings)]


def test_unknown_backend_is_refused():
    with pytest.raises(TrainingSetupError, match="training.backend = 'dask'"):
        make_backend(_setup(), BackendSettings(backend="dask"))
    with pytest.raises(ValueError, match="unknown backend"):
        backends.register_backend("dask", lambda setup, settings: None)


def test_cli_ray_backend_without_ray_exits_2_naming_the_extra(tmp_path):
    if _has_ray():
        pytest.skip("ray is installed here")
    from tests.training.conftest import TINY_DQN

    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(TINY_DQN))
    env = dict(os.environ, WANDB_MODE="offline", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(manifest), "--no-verbose", "--seed", "1",
         "--backend", "ray", "--run-dir", str(tmp_path / "run")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "pip install 'agilerl[ray]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_rejects_a_bad_worker_count(tmp_path):
    from agilerl.cli.train import parse_args

    with pytest.raises(SystemExit) as raised:
        parse_args([str(tmp_path / "m.yaml"), "--workers", "-1"])
    assert raised.value.code == 2
    args = parse_args([str(tmp_path / "m.yaml"), "--workers", "2", "--backend", "ray",
                       "--ray-address", "auto"])
    assert (args.workers, args.backend, args.ray_address) == (2, "ray", "auto")


def _has_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True
