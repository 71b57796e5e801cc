"""The shipped manifests in ``configs/training/`` learn their task (slow: minutes each; run
with ``-m slow``).

Each case trains a shipped manifest unchanged but for its budget (the benchmark budget per
member of ``bench/learning.py``) with one seed, and asserts a best evaluation at a reduced
threshold: the benchmark holds the full targets over five seeds, these tests catch a change
that stops a shipped manifest from learning at all.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from agilerl.training.trainer import LocalTrainer

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "training"

# (manifest, budget per member, threshold): the benchmark targets are 475 (CartPole, and
# CartPoleNoVel-v1 for recurrent PPO) and 200 (LunarLander, and LunarLanderContinuous for
# TD3); the thresholds leave room for another platform's floating point. TD3's budget is cut
# to 100k of the benchmark's 300k (seed 1 passes 200 at 70k and stops at 90k: 23 minutes here).
CASES = [
    ("dqn.yaml", 50_000, 400.0),
    ("rainbow_dqn.yaml", 50_000, 400.0),
    ("dqn_lunar.yaml", 300_000, 100.0),
    ("ppo_recurrent.yaml", 100_000, 400.0),
    ("ppo_mfpbt.yaml", 100_000, 400.0),
    ("td3.yaml", 100_000, 100.0),
]


def _manifest(name: str, budget: int) -> dict:
    manifest = yaml.safe_load((CONFIGS / name).read_text())
    manifest["training"]["max_steps"] = budget
    return manifest


@pytest.mark.slow
@pytest.mark.timeout(3600)  # LunarLander: about 10 min on an idle core, far more when shared
@pytest.mark.parametrize(("name", "budget", "threshold"), CASES,
                         ids=[case[0].removesuffix(".yaml") for case in CASES])
def test_shipped_manifest_learns(name, budget, threshold, tmp_path):
    manifest = _manifest(name, budget)
    if manifest["environment"]["name"].startswith("LunarLander"):
        pytest.importorskip("Box2D", reason="LunarLander needs the [box2d] extra")
    trainer = LocalTrainer.from_manifest(manifest=manifest, seed=1)
    trainer.train(verbose=False, run_dir=tmp_path)
    # The best evaluation of any generation (the benchmark's "best eval"), from metrics.csv.
    with (tmp_path / "metrics.csv").open() as rows:
        best = [float(row["eval/best_fitness"]) for row in csv.DictReader(rows)
                if row.get("eval/best_fitness")]
    assert best, "metrics.csv has no evaluation"
    assert max(best) >= threshold, best
