"""Neural Thompson Sampling (Zhang, Zhou, Li and Gu, 2021) for contextual bandits.

Pulls ``argmax_a r_a`` with ``r_a ~ N(f(x_a), (gamma * sqrt(g(x_a)^T Z^-1 g(x_a)))^2)``:
one posterior sample per arm, drawn from the agent's own generator (so a run repeats from
its seed); the confidence width is the one NeuralUCB adds
(:mod:`agilerl.algorithms.core.bandit`). The network starts from the papers' Gaussian
initialisation, as the reference's does.
"""

from __future__ import annotations

import numpy as np

from agilerl.algorithms.core.bandit import NeuralBandit
from agilerl.algorithms.core.registry import registered
from agilerl.models._generated.hyperparameter_attributes import NeuralTSHyperparameterAttributes


@registered
class NeuralTS(NeuralTSHyperparameterAttributes, NeuralBandit):
    """NeuralTS: pull the arm whose sampled reward is highest."""

    algo = "NeuralTS"
    gaussian_init = True  # on the iris bandit it learned more than from orthogonal weights

    def exploration_scores(self, mean: np.ndarray, width: np.ndarray) -> np.ndarray:
        return mean + self.gamma * width * self.np_rng.standard_normal(len(mean))
