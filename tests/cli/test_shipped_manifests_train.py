"""The shipped example manifests of the newer paradigms train through the CLI as written
(with a small budget): multi-agent, offline and bandit manifests under configs/training."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peer.cli_run import REPO, train_with_budget

CONFIGS = REPO / "configs" / "training"


@pytest.mark.parametrize("name", ["ippo", "maddpg", "matd3", "cqn", "neural_ucb", "neural_ts"])
def test_shipped_manifest_trains(name: str, tmp_path: Path) -> None:
    run_dir = train_with_budget(CONFIGS / f"{name}.yaml", tmp_path, 256, [], timeout=300)
    assert (run_dir / "elite.pt").is_file()
