"""Suite-wide test settings: deterministic, single-threaded, offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist loadgroup`` (``make test``) every ``ray`` test runs in one
    worker, one module after another: at most one local Ray cluster (two nodes of one CPU
    each) runs at a time, and a module's tests share its ``ray_cluster`` as they do serially."""
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def peer_manifests_dir() -> Path:
    path = SHARED / "peer-manifests"
    if not path.is_dir():
        pytest.skip("shared/peer-manifests is not beside this checkout")
    return path


@pytest.fixture(scope="module")
def ray_cluster():
    """A real two-node Ray cluster on 127.0.0.1 (one CPU per node; ``ray start --head``
    then ``ray start --address``), HOME and temp folders under a fresh temporary folder,
    shared by one module's Ray tests and stopped (every process it started, by process id)
    after them, so no Ray process outlives the module."""
    pytest.importorskip("ray")
    from agilerl.population.ray_cluster import local_ray_cluster

    with local_ray_cluster(nodes=2, cpus_per_node=1) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _single_thread_torch():
    """Keep torch to one thread so two test workers do not oversubscribe two cores."""
    try:
        import sys

        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
    except Exception:  # pragma: no cover - torch missing is fine for light tests
        pass
    yield
