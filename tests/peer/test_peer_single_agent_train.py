"""Every single-agent RL manifest a reference user brings trains unchanged through the CLI.

Each manifest under ``shared/peer-manifests`` whose algorithm is a single-agent online RL
algorithm runs as ``python -m agilerl.train MANIFEST`` with only a small budget override
(``training.max_steps``, and ``training.evo_steps`` so that at least one generation ends),
and must exit 0, write a checkpoint and save an elite that loads and acts on the manifest's
environment. Manifests that need a large environment (Atari, MuJoCo) are ``slow``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PEER = REPO.parent / "shared" / "peer-manifests"

#: Single-agent online RL peer manifests. Budget per agent: small, but past learning delays.
#: Entries marked slow build environments that take long to step or to install (Atari,
#: MuJoCo) or train image networks.
MANIFESTS: dict[str, dict[str, object]] = {
    "configs/dqn/dqn.yaml": {},
    "configs/dqn/dqn_mfpbt.yaml": {},
    "configs/dqn/dqn_rainbow.yaml": {},
    "configs/ppo/ppo.yaml": {},
    "configs/ppo/ppo_mfpbt.yaml": {},
    "configs/ppo/ppo_recurrent.yaml": {},
    # Breakout: an untrained greedy policy never presses FIRE after losing a life, so an
    # evaluation to the episode's end lasts ALE's 27,000-step cap; evaluations are capped.
    "configs/ppo/ppo_image.yaml": {"slow": True, "overrides": ["training.eval_steps=500"]},
    "configs/td3.yaml": {},
    "configs/ddpg/ddpg.yaml": {},
    "configs/ddpg/ddpg_simba.yaml": {"slow": True},  # HalfCheetah-v4: pip install agilerl[mujoco]
    "configs/multi_input.yaml": {},
    "tests/dqn.yaml": {},
    "tests/ppo.yaml": {},
    "tests/ppo_cnn.yaml": {},
    "tests/ppo_lstm.yaml": {},
    "tests/rainbow_dqn.yaml": {},
    "tests/td3.yaml": {},
    "tests/ddpg.yaml": {},
    "tests/ddpg_simba.yaml": {},
    "tests/multi_input.yaml": {},
}

#: Env steps per agent (all agents together train pop_size times this).
BUDGET = 2_048


def _params() -> list[object]:
    marks = []
    for name, options in MANIFESTS.items():
        extra = [pytest.mark.slow] if options.get("slow") else []
        marks.append(pytest.param(name, marks=extra, id=name.replace("/", "-")))
    return marks


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return env


@pytest.mark.skipif(not PEER.is_dir(), reason="shared/peer-manifests is not beside this checkout")
@pytest.mark.parametrize("name", _params())
def test_peer_manifest_trains_checkpoints_and_elite_acts(name: str, tmp_path: Path) -> None:
    manifest = PEER / name
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(manifest), "--no-verbose", "--seed", "3",
         "--run-dir", str(run_dir), "--save-elite", "--checkpoint-steps", str(BUDGET),
         f"training.max_steps={BUDGET}", f"training.evo_steps={BUDGET // 2}",
         *MANIFESTS[name].get("overrides", [])],  # type: ignore[misc]
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    checkpoints = [p for p in (run_dir / "checkpoints").iterdir() if (p / "index.json").is_file()]
    assert checkpoints, "no checkpoint was written"
    _elite_acts(run_dir)


def _elite_acts(run_dir: Path) -> None:
    """The saved elite loads by itself and returns one valid action per sub-env."""
    from agilerl.algorithms.core.base import RLAlgorithm
    from agilerl.envs import make_vector_env
    from agilerl.models import TrainingManifest, resolve_env_spec

    agent = RLAlgorithm.load(run_dir / "elite.pt")
    manifest = TrainingManifest.get_validated(yaml.safe_load((run_dir / "manifest.yaml")
                                                             .read_text()), mode="python")
    spec = resolve_env_spec(manifest.algorithm, manifest.environment)
    env = make_vector_env(spec, seed=0)
    try:
        obs, _ = env.reset(seed=0)
        action = np.asarray(agent.greedy_action(obs))
        assert len(action) == env.num_envs
        for a in action:
            assert env.single_action_space.contains(
                a.astype(env.single_action_space.dtype) if hasattr(a, "astype") else a)
        env.step(action)
    finally:
        env.close()
