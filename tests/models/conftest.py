"""Fixtures for the manifest tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def peer_manifest_files(peer_manifests_dir: Path) -> list[Path]:
    files = sorted((peer_manifests_dir / "configs").rglob("*.yaml"))
    files += sorted((peer_manifests_dir / "tests").rglob("*.yaml"))
    assert len(files) == 51
    return files


@pytest.fixture()
def peer_data_cwd(peer_manifests_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the folder the bandit manifests' relative data paths start at."""
    data = peer_manifests_dir / "data"
    monkeypatch.chdir(data)
    return data


@pytest.fixture()
def dummy_image_registered() -> Iterator[str]:
    """``DummyImage-v0``, which the reference's test suite registers for its
    ``tests/ppo_cnn.yaml`` (validation sees the live registry of an imported Gymnasium)."""
    import gymnasium

    gymnasium.register("DummyImage-v0", entry_point="tests.models.conftest:DummyImageEnv")
    try:
        yield "DummyImage-v0"
    finally:
        del gymnasium.registry["DummyImage-v0"]


class DummyImageEnv:
    """Stands in for the reference's image test environment (never made: only registered)."""


@pytest.fixture(scope="session")
def config_files() -> list[Path]:
    return sorted((REPO_ROOT / "configs" / "training").rglob("*.yaml"))
