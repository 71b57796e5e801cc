"""On-policy paradigm (PPO, ...): the member trainer that collects rollouts and learns."""

from __future__ import annotations

from collections.abc import Generator
from typing import cast

from agilerl.core.member_training import Agent, TrainReport
from agilerl.training.experience import (
    MemberResult,
    OnPolicyMember,
    RolloutPoint,
    on_policy_member_run,
    train_on_policy_member,
)


class OnPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for on-policy agents: rollouts then ``learn``
    (``max_steps``: the run's budget per member, which a learning-rate schedule follows)."""

    def __init__(self, env: object, max_steps: int | None = None) -> None:
        self.env = env
        self.max_steps = max_steps

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        member = cast(OnPolicyMember, agent)  # the members of an on-policy run
        return self.report(train_on_policy_member(member, self.env, steps, seed=seed,
                                                  max_steps=self.max_steps))

    def run(self, agent: OnPolicyMember, steps: int, *, seed: int, env: object = None,
            memory: object = None) -> Generator[RolloutPoint, dict[str, float], MemberResult]:
        """The same call as a generator that yields at every learning update (see
        :func:`on_policy_member_run`), on ``env`` (default: the trainer's); on-policy
        members keep no ``memory``."""
        return on_policy_member_run(agent, self.env if env is None else env, steps, seed=seed,
                                    max_steps=self.max_steps)

    @staticmethod
    def report(result: MemberResult) -> TrainReport:
        """The :class:`TrainReport` of a member call's result."""
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))
