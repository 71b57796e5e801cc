"""RL algorithms (maths per algorithm; shared plumbing in ``agilerl.algorithms.core``).

Each implementation is one module (``dqn.py``, ``ppo.py``) that registers its class with
:func:`~agilerl.algorithms.core.registry.registered`; ``from agilerl.algorithms import DQN``
finds any registered class by its name, loading its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.core.build import build_algorithm
from agilerl.algorithms.core.registry import (
    NotImplementedAlgorithmError,
    algorithm_class,
    implemented,
    registered,
)

if TYPE_CHECKING:
    # What ``__getattr__`` loads, named for type checkers (users' ``DQN(...)`` calls are
    # checked against the real class); tests/algorithms/test_registry.py keeps this list
    # equal to the registry's.
    from agilerl.algorithms.cispo import CISPO as CISPO
    from agilerl.algorithms.core.member_state import MemberState
    from agilerl.algorithms.cqn import CQN as CQN
    from agilerl.algorithms.ddpg import DDPG as DDPG
    from agilerl.algorithms.dpo import DPO as DPO
    from agilerl.algorithms.dqn import DQN as DQN
    from agilerl.algorithms.grpo import GRPO as GRPO
    from agilerl.algorithms.gspo import GSPO as GSPO
    from agilerl.algorithms.ippo import IPPO as IPPO
    from agilerl.algorithms.llmppo import LLMPPO as LLMPPO
    from agilerl.algorithms.llmreinforce import LLMREINFORCE as LLMREINFORCE
    from agilerl.algorithms.maddpg import MADDPG as MADDPG
    from agilerl.algorithms.matd3 import MATD3 as MATD3
    from agilerl.algorithms.neural_ts import NeuralTS as NeuralTS
    from agilerl.algorithms.neural_ucb import NeuralUCB as NeuralUCB
    from agilerl.algorithms.ppo import PPO as PPO
    from agilerl.algorithms.rainbow_dqn import RainbowDQN as RainbowDQN
    from agilerl.algorithms.sft import SFT as SFT
    from agilerl.algorithms.td3 import TD3 as TD3

__all__ = [
    "NotImplementedAlgorithmError",
    "RLAlgorithm",
    "algorithm_class",
    "build_algorithm",
    "implemented",
    "registered",
]


def __getattr__(name: str) -> type[MemberState]:
    from agilerl.algorithms.core.registry import IMPLEMENTATIONS, load

    cls = IMPLEMENTATIONS.get(name) or load(name)
    if cls is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return cls


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(implemented()))
