"""RL algorithms (maths per algorithm; shared plumbing in ``agilerl.algorithms.core``)."""

from agilerl.algorithms.core.base import RLAlgorithm
from agilerl.algorithms.dqn import DQN
from agilerl.algorithms.ppo import PPO
from agilerl.algorithms.registry import algorithm_class, build_algorithm

__all__ = ["DQN", "PPO", "RLAlgorithm", "algorithm_class", "build_algorithm"]
