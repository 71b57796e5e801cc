"""Running a reference manifest through ``python -m agilerl.train`` for the peer tables."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PEER = REPO.parent / "shared" / "peer-manifests"

needs_peer = pytest.mark.skipif(not PEER.is_dir(),
                                reason="shared/peer-manifests is not beside this checkout")


def manifest_params(manifests: Mapping[str, Mapping[str, object]]) -> list[object]:
    """One parameter per manifest, marked ``slow`` where its options say so."""
    return [pytest.param(name, marks=[pytest.mark.slow] if options.get("slow") else [],
                         id=name.replace("/", "-"))
            for name, options in manifests.items()]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return env


def train_with_budget(manifest: Path, tmp_path: Path, budget: int, overrides: list[str],
                      timeout: int) -> Path:
    """Train ``manifest`` with ``budget`` env steps per member (half of it per generation);
    assert exit 0, no traceback and a checkpoint; the run folder."""
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(manifest), "--no-verbose", "--seed", "3",
         "--run-dir", str(run_dir), "--save-elite", "--checkpoint-steps", str(budget),
         f"training.max_steps={budget}", f"training.evo_steps={budget // 2}", *overrides],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    checkpoints = [p for p in (run_dir / "checkpoints").iterdir() if (p / "index.json").is_file()]
    assert checkpoints, "no checkpoint was written"
    return run_dir
