"""On-policy paradigm (PPO, ...): the member trainer that collects rollouts and learns."""

from __future__ import annotations

from typing import Any

from agilerl.population.backend import Deadline, TrainReport
from agilerl.training.experience import train_on_policy_member


class OnPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for on-policy agents: rollouts then ``learn``."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __call__(self, agent: Any, steps: int, *, seed: int,
                 deadline: Deadline | None = None) -> TrainReport:
        result = train_on_policy_member(agent, self.env, steps, seed=seed)
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))
