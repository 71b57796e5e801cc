"""Fixtures of the dashboard tests: synthetic run folders and a served dashboard."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from agilerl.dashboard import DashboardServer

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="session")
def synthetic() -> Iterator[ModuleType]:
    """``bench/dashboard_synthetic.py``: ``SyntheticRun`` and ``write_run``."""
    sys.path.insert(0, str(BENCH))
    try:
        import dashboard_synthetic

        yield dashboard_synthetic
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


@pytest.fixture
def served(runs_dir: Path) -> Iterator[DashboardServer]:
    """The dashboard over ``runs_dir`` on a free loopback port."""
    server = DashboardServer([runs_dir], port=0)
    server.start_background()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
