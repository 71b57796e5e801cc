"""Public algorithm spec classes, one module per algorithm (``agilerl.models.algorithms.dqn``).

Each class is created when first used, so importing this package is cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agilerl.models.algo import spec_module

__all__ = [
    "CISPOSpec",
    "CQNSpec",
    "DDPGSpec",
    "DPOSpec",
    "DQNSpec",
    "GRPOSpec",
    "GSPOSpec",
    "IPPOSpec",
    "LLMPPOSpec",
    "LLMREINFORCESpec",
    "MADDPGSpec",
    "MATD3Spec",
    "NeuralTSSpec",
    "NeuralUCBSpec",
    "PPOSpec",
    "RainbowDQNSpec",
    "SFTSpec",
    "TD3Spec",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(spec_module(name.removesuffix("Spec"))), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # pragma: no cover
    from agilerl.models.algorithms.cispo import CISPOSpec
    from agilerl.models.algorithms.cqn import CQNSpec
    from agilerl.models.algorithms.ddpg import DDPGSpec
    from agilerl.models.algorithms.dpo import DPOSpec
    from agilerl.models.algorithms.dqn import DQNSpec
    from agilerl.models.algorithms.grpo import GRPOSpec
    from agilerl.models.algorithms.gspo import GSPOSpec
    from agilerl.models.algorithms.ippo import IPPOSpec
    from agilerl.models.algorithms.llmppo import LLMPPOSpec
    from agilerl.models.algorithms.llmreinforce import LLMREINFORCESpec
    from agilerl.models.algorithms.maddpg import MADDPGSpec
    from agilerl.models.algorithms.matd3 import MATD3Spec
    from agilerl.models.algorithms.neural_ts import NeuralTSSpec
    from agilerl.models.algorithms.neural_ucb import NeuralUCBSpec
    from agilerl.models.algorithms.ppo import PPOSpec
    from agilerl.models.algorithms.rainbow_dqn import RainbowDQNSpec
    from agilerl.models.algorithms.sft import SFTSpec
    from agilerl.models.algorithms.td3 import TD3Spec
