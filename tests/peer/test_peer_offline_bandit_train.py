"""Every offline (CQN) and bandit (NeuralUCB, NeuralTS) peer manifest trains unchanged.

Each runs as ``python -m agilerl.train MANIFEST`` with only a small budget override and
must exit 0, write a checkpoint and save an elite that loads and acts. The CQN manifests
name Minari datasets (``cartpole/random-v0``, ``cartpole-v0``); nothing is downloaded, so
the test writes small local Minari datasets under those ids (random CartPole episodes)
into a temporary ``MINARI_DATASETS_PATH``. The bandit manifests name
``tests/data/iris_*.csv`` relative to the reference repository's root, so they run from
the folder that holds those files, as a reference user's do.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
PEER = REPO.parent / "shared" / "peer-manifests"

#: Manifest -> (updates (CQN) or pulls (bandits) per member, slow). One manifest of each
#: algorithm runs in the default suite; the larger populations (MF-PBT: 16) are slow.
MANIFESTS: dict[str, tuple[int, bool]] = {
    "configs/cqn.yaml": (200, True),
    "configs/cqn_mfpbt.yaml": (100, True),
    "tests/cqn.yaml": (200, False),
    "configs/bandit/neural_ucb.yaml": (300, True),
    "configs/bandit/neural_ts.yaml": (300, True),
    "configs/bandit/neural_ucb_mfpbt.yaml": (150, True),
    "tests/neural_ucb.yaml": (300, False),
    "tests/neural_ts.yaml": (300, False),
}
MINARI_IDS = ("cartpole/random-v0", "cartpole-v0")


def write_minari_cartpole(root: Path, dataset_id: str, episodes: int = 30, seed: int = 0) -> None:
    """A local Minari dataset of random-policy CartPole-v1 episodes under ``dataset_id``."""
    import gymnasium as gym
    import minari
    from minari.data_collector import EpisodeBuffer

    os.environ["MINARI_DATASETS_PATH"] = str(root)
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    buffers = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        observations, actions, rewards, terms, truncs = [obs], [], [], [], []
        done = False
        while not done:
            action = int(rng.integers(2))
            obs, reward, terminated, truncated, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(reward)
            terms.append(terminated)
            truncs.append(truncated)
            done = terminated or truncated
        buffers.append(EpisodeBuffer(
            observations=np.asarray(observations, dtype=np.float32),
            actions=np.asarray(actions), rewards=np.asarray(rewards, dtype=np.float32),
            terminations=np.asarray(terms), truncations=np.asarray(truncs), infos={}))
    minari.create_dataset_from_buffers(
        dataset_id, buffers, env=env, algorithm_name="random", author="agilerl tests",
        author_email="tests@agilerl.invalid", code_permalink="tests", description="test data",
        eval_env=env)
    env.close()


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("minari")
    previous = os.environ.get("MINARI_DATASETS_PATH")
    try:
        for dataset_id in MINARI_IDS:
            write_minari_cartpole(root, dataset_id)
    finally:
        if previous is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous
    return root


def _env(minari_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(WANDB_MODE="offline", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
               MINARI_DATASETS_PATH=str(minari_root))
    return env


@pytest.mark.skipif(not PEER.is_dir(), reason="shared/peer-manifests is not beside this checkout")
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if slow else [], id=name.replace("/", "-"))
    for name, (_, slow) in MANIFESTS.items()])
def test_peer_manifest_trains_checkpoints_and_elite_acts(
        name: str, tmp_path: Path, minari_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = MANIFESTS[name][0]
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "agilerl.train", str(PEER / name), "--no-verbose", "--seed", "3",
         "--run-dir", str(run_dir), "--save-elite", "--checkpoint-steps", str(budget),
         f"training.max_steps={budget}", f"training.evo_steps={budget // 2}"],
        cwd=PEER / "data", env=_env(minari_root), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    checkpoints = [p for p in (run_dir / "checkpoints").iterdir() if (p / "index.json").is_file()]
    assert checkpoints, "no checkpoint was written"
    monkeypatch.chdir(PEER / "data")  # where the bandit manifests' tables are found
    _elite_acts(run_dir)


def _elite_acts(run_dir: Path) -> None:
    """The saved elite loads by itself and picks a valid action on the manifest's env."""
    import yaml

    from agilerl.algorithms.core.base import RLAlgorithm
    from agilerl.envs import make_vector_env
    from agilerl.envs.bandit import make_bandit_env
    from agilerl.models import TrainingManifest, resolve_env_spec

    agent = RLAlgorithm.load(run_dir / "elite.pt")
    manifest = TrainingManifest.get_validated(
        yaml.safe_load((run_dir / "manifest.yaml").read_text()), mode="python")
    spec = resolve_env_spec(manifest.algorithm, manifest.environment)
    if agent.algo in ("NeuralUCB", "NeuralTS"):
        env = make_bandit_env(spec, seed=0)
        context = env.reset(seed=0)
        arm = agent.greedy_action(context)
        assert env.single_action_space.contains(arm)
        env.step(arm)
        return
    env = make_vector_env(spec, seed=0)
    try:
        obs, _ = env.reset(seed=0)
        actions = np.asarray(agent.greedy_action(obs))
        assert len(actions) == env.num_envs
        assert all(env.single_action_space.contains(int(a)) for a in actions)
        env.step(actions)
    finally:
        env.close()
