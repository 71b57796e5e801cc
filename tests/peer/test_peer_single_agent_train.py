"""Every single-agent RL manifest a reference user brings trains unchanged through the CLI.

Each manifest under ``shared/peer-manifests`` whose algorithm is a single-agent online RL
algorithm runs as ``python -m agilerl.train MANIFEST`` with only a small budget override
(``training.max_steps``, and ``training.evo_steps`` so that at least one generation ends),
and must exit 0, write a checkpoint and save an elite that loads and acts on the manifest's
environment. Manifests that need a large environment (Atari, MuJoCo) are ``slow``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.peer.cli_run import PEER, manifest_params, needs_peer, train_with_budget

#: Single-agent online RL peer manifests. Budget per agent: small, but past learning delays.
#: Entries marked slow build environments that take long to step or to install (Atari,
#: MuJoCo) or train image networks.
MANIFESTS: dict[str, dict[str, object]] = {
    "configs/dqn/dqn.yaml": {},
    # 16 greedy LunarLander members mostly hover to the 1,000-step cap when evaluated to the
    # episode's end, which was half of this run; evaluations are capped here (dqn.yaml and
    # ppo_mfpbt.yaml still evaluate to the episode's end).
    "configs/dqn/dqn_mfpbt.yaml": {"overrides": ["training.eval_steps=200"]},
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


@needs_peer
@pytest.mark.parametrize("name", manifest_params(MANIFESTS))
def test_peer_manifest_trains_checkpoints_and_elite_acts(name: str, tmp_path: Path) -> None:
    overrides = list(MANIFESTS[name].get("overrides", []))  # type: ignore[call-overload]
    _elite_acts(train_with_budget(PEER / name, tmp_path, BUDGET, overrides, timeout=600))


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
