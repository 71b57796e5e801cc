"""The shipped Pendulum-v1 manifests (``configs/training/ddpg.yaml``, ``td3_pendulum.yaml``)
learn through the public API within half their 20k-per-member budget (slow: one to two
minutes each on one core; run with ``-m slow``).

The threshold is reduced (-400 rather than the manifests' -200) so that the test checks
learning, not one seed's luck; ``bench/time_to_target.py`` measures the target over seeds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agilerl.training.trainer import LocalTrainer

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "training"


@pytest.mark.slow
@pytest.mark.parametrize("file", ["ddpg.yaml", "td3_pendulum.yaml"])
def test_shipped_pendulum_manifest_learns(file: str) -> None:
    manifest = yaml.safe_load((CONFIGS / file).read_text())
    assert manifest["environment"]["name"] == "Pendulum-v1"
    manifest["training"].update(max_steps=10_000, target_score=-400.0)
    trainer = LocalTrainer.from_manifest(manifest=manifest, seed=1)
    _, fitnesses = trainer.train(verbose=False)
    assert max(fitnesses) >= -400.0
