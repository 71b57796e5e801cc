"""Off-policy paradigm (DQN, ...): the member trainer that fills a replay memory and learns.

The replay memory is shared by the whole population (as in the reference library): every
member's experience is available to every other member. How a member explores is its own
business (``explore_action``; the DQN family reads ``training.eps_*``), see
:mod:`agilerl.algorithms.core.exploration`.
"""

from __future__ import annotations

from typing import Any

from agilerl.population.backend import TrainReport
from agilerl.training.experience import train_off_policy_member


class OffPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for off-policy agents: act, store, learn."""

    def __init__(self, env: Any, memory: Any, training: Any) -> None:
        self.env = env
        self.memory = memory
        self.training = training
        self.learning_delay = int(training.learning_delay)
        self.max_steps = int(training.max_steps)

    def __call__(self, agent: Any, steps: int, *, seed: int) -> TrainReport:
        result = train_off_policy_member(
            agent, self.env, self.memory, steps, learning_delay=self.learning_delay,
            exploration=type(agent).exploration_settings(self.training), seed=seed,
            max_steps=self.max_steps,
        )
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))
