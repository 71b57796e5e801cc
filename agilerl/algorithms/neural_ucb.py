"""Neural Upper Confidence Bound (Zhou, Li and Gu, 2020) for contextual bandits.

Pulls ``argmax_a f(x_a) + gamma * sqrt(g(x_a)^T Z^-1 g(x_a))``: the predicted reward plus
``gamma`` (the exploration scale) times the confidence width of the shared network's
output-layer gradient features (:mod:`agilerl.algorithms.core.bandit`).
"""

from __future__ import annotations

import numpy as np

from agilerl.algorithms.core.bandit import NeuralBandit
from agilerl.algorithms.core.registry import registered
from agilerl.models._generated.hyperparameter_attributes import NeuralUCBHyperparameterAttributes


@registered
class NeuralUCB(NeuralUCBHyperparameterAttributes, NeuralBandit):
    """NeuralUCB: optimism in the face of uncertainty."""

    algo = "NeuralUCB"

    def exploration_scores(self, mean: np.ndarray, width: np.ndarray) -> np.ndarray:
        return mean + self.gamma * width
