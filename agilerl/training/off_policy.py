"""Off-policy paradigm (DQN, ...): the member trainer that fills a replay memory and learns.

The replay memory is shared by the whole population (as in the reference library): every
member's experience is available to every other member. How a member explores is its own
business (``explore_action``; the DQN family reads ``training.eps_*``), see
:mod:`agilerl.algorithms.core.exploration`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, cast

from agilerl.core.member_training import Agent, TrainReport
from agilerl.training.experience import (
    LearnPoint,
    MemberResult,
    OffPolicyMember,
    off_policy_member_run,
    train_off_policy_member,
)

if TYPE_CHECKING:
    from agilerl.core.replay_memory import TransitionMemory
    from agilerl.models.training import TrainingSpec


class OffPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for off-policy agents: act, store, learn."""

    def __init__(self, env: object, memory: TransitionMemory, training: TrainingSpec) -> None:
        self.env = env
        self.memory = memory
        self.training = training
        self.learning_delay = int(training.learning_delay)
        self.max_steps = int(training.max_steps)

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        member = cast(OffPolicyMember, agent)  # the members of an off-policy run
        result = train_off_policy_member(
            member, self.env, self.memory, steps, learning_delay=self.learning_delay,
            exploration=type(member).exploration_settings(self.training), seed=seed,
            max_steps=self.max_steps,
        )
        return self.report(result)

    def run(self, agent: OffPolicyMember, steps: int, *, seed: int, env: object = None,
            memory: TransitionMemory | None = None
            ) -> Generator[LearnPoint, dict[str, float], MemberResult]:
        """The same call as a generator that yields at every learning update (see
        :func:`off_policy_member_run`), on ``env`` and ``memory`` (default: the trainer's)."""
        return off_policy_member_run(
            agent, self.env if env is None else env, self.memory if memory is None else memory,
            steps, learning_delay=self.learning_delay,
            exploration=type(agent).exploration_settings(self.training), seed=seed,
            max_steps=self.max_steps,
        )

    @staticmethod
    def report(result: MemberResult) -> TrainReport:
        """The :class:`TrainReport` of a member call's result."""
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))
