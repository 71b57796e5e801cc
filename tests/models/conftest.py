"""Fixtures for the manifest tests."""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def config_files() -> list[Path]:
    return sorted((REPO_ROOT / "configs" / "training").rglob("*.yaml"))
