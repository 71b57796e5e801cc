"""Suite-wide test settings: deterministic, single-threaded, offline."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Runs without a run folder of their own (train() from Python, the CLI without --run-dir)
# make one under here, not under the checkout's runs/.
os.environ.setdefault("AGILERL_RUNS_DIR", os.path.join(
    os.environ.get("PYTEST_DEBUG_TEMPROOT", "/tmp"), f"agilerl-test-runs-{os.getuid()}"))

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"


#: Files that hold the ``ray`` tests (each starts a local Ray cluster). ``make test`` runs the
#: suite in two processes and keeps these files in one of them, one after another, so at
#: most one Ray cluster runs at a time and a module's tests share its ``ray_cluster``.
RAY_TEST_FILES = "test_ray_*.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A ``ray`` test outside a ``test_ray_*.py`` file would escape that grouping."""
    for item in items:
        if item.get_closest_marker("ray") is not None and not item.path.match(RAY_TEST_FILES):
            raise pytest.UsageError(f"{item.nodeid}: a `ray` test belongs in a "
                                    f"{RAY_TEST_FILES} file (see tests/conftest.py)")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` with every ``test_ray_*.py`` test in one group. (pytest-xdist
    3.8's own ``xdist_group`` marks have no effect under pytest 9.2: it renames node ids
    through an attribute pytest no longer reads, pytest-xdist issue #1386.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class RayTestsTogether(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if PurePosixPath(nodeid.split("::", 1)[0]).match(RAY_TEST_FILES):
                return "ray"
            return super()._split_scope(nodeid)

    return RayTestsTogether(config, log)


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
