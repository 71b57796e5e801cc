"""Off-policy paradigm (DQN, ...): the member trainer that fills a replay memory and learns.

The replay memory is shared by the whole population (as in the reference library): every
member's experience is available to every other member. How a member explores is its own
business (``explore_action``; the DQN family reads ``training.eps_*``), see
:mod:`agilerl.algorithms.core.exploration`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.core.member_training import Deadline, TrainReport
from agilerl.training.experience import (
    LearnPoint,
    off_policy_member_run,
    train_off_policy_member,
)


class OffPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for off-policy agents: act, store, learn."""

    def __init__(self, env: Any, memory: ReplayBuffer, training: Any) -> None:
        self.env = env
        self.memory = memory
        self.training = training
        self.learning_delay = int(training.learning_delay)
        self.max_steps = int(training.max_steps)

    def __call__(self, agent: Any, steps: int, *, seed: int,
                 deadline: Deadline | None = None) -> TrainReport:
        result = train_off_policy_member(
            agent, self.env, self.memory, steps, learning_delay=self.learning_delay,
            exploration=type(agent).exploration_settings(self.training), seed=seed,
            max_steps=self.max_steps,
        )
        return self.report(result)

    def run(self, agent: Any, steps: int, *, seed: int, env: Any = None,
            memory: Any = None) -> Generator[LearnPoint, dict[str, float], dict[str, Any]]:
        """The same call as a generator that yields at every learning update (see
        :func:`off_policy_member_run`), on ``env`` and ``memory`` (default: the trainer's)."""
        return off_policy_member_run(
            agent, self.env if env is None else env, self.memory if memory is None else memory,
            steps, learning_delay=self.learning_delay,
            exploration=type(agent).exploration_settings(self.training), seed=seed,
            max_steps=self.max_steps,
        )

    @staticmethod
    def report(result: dict[str, Any]) -> TrainReport:
        """The :class:`TrainReport` of a member call's result."""
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))
