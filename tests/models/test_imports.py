"""``agilerl.models`` (and the light Arena models) load without torch or gymnasium."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import json, sys
import {module}
print(json.dumps(sorted(m for m in ("torch", "gymnasium", "pettingzoo", "numpy", "jsonschema")
                        if m in sys.modules)))
"""


@pytest.mark.parametrize("module", ["agilerl.models", "agilerl.arena.models", "agilerl.cli.main"])
def test_import_pulls_no_heavy_modules(module: str) -> None:
    result = subprocess.run([sys.executable, "-c", _PROBE.format(module=module)],
                            capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert "torch" not in loaded
    assert "gymnasium" not in loaded
    assert "pettingzoo" not in loaded


def test_public_import_paths() -> None:
    import importlib

    import agilerl.models as models

    for name in ("TrainingManifest", "ALGO_REGISTRY", "AlgoSpec", "RLAlgorithmSpec",
                 "MultiAgentRLAlgorithmSpec", "LLMAlgorithmSpec", "TrainingSpec",
                 "ReplayBufferSpec", "MutationSpec", "MutationProbabilities",
                 "TournamentSelectionSpec", "MultiFrequencySelectionSpec",
                 "SelectionStrategySpec", "NetworkSpec", "MlpSpec", "CnnSpec", "LstmSpec",
                 "SimbaSpec", "MultiInputSpec", "QNetworkSpec", "ContinuousQNetworkSpec",
                 "DeterministicActorSpec", "StochasticActorSpec", "ValueNetworkSpec",
                 "FinetuningNetworkSpec", "GymEnvSpec", "PzEnvSpec", "OfflineEnvSpec",
                 "BanditEnvSpec", "LLMEnvSpec", "AgentType", "ManifestError"):
        assert hasattr(models, name), name
    modules = {
        "dqn": "DQN", "rainbow_dqn": "RainbowDQN", "ddpg": "DDPG", "td3": "TD3", "ppo": "PPO",
        "cqn": "CQN", "neural_ts": "NeuralTS", "neural_ucb": "NeuralUCB", "ippo": "IPPO",
        "maddpg": "MADDPG", "matd3": "MATD3", "grpo": "GRPO", "gspo": "GSPO", "cispo": "CISPO",
        "llmppo": "LLMPPO", "llmreinforce": "LLMREINFORCE", "dpo": "DPO", "sft": "SFT",
    }
    for module, name in modules.items():
        spec = getattr(importlib.import_module(f"agilerl.models.algorithms.{module}"), f"{name}Spec")
        assert models.ALGO_REGISTRY[name] is spec
        assert getattr(importlib.import_module("agilerl.models.algorithms"), f"{name}Spec") is spec
    import agilerl
    from agilerl.models.algo import ALGO_REGISTRY, AlgoSpec  # noqa: F401
    from agilerl.models.env import EnvSpec, LLMEnvType  # noqa: F401
    from agilerl.models.hpo import MutationSpec, TournamentSelectionSpec  # noqa: F401
    from agilerl.models.manifest import TrainingManifest  # noqa: F401
    from agilerl.models.networks import MlpSpec, NetworkSpec  # noqa: F401
    from agilerl.models.training import NStepBufferArgs, PerBufferArgs, TrainingSpec  # noqa: F401

    assert agilerl.TrainingManifest is models.TrainingManifest
    assert agilerl.AgentType.SingleAgent.value == "single_agent"
