"""Bandit paradigm (NeuralUCB, NeuralTS): pull arms, store what was seen, learn.

One "step" is one pull: the member picks an arm for the env's context (exploring), the env
returns its reward and the next context, and the pulled arm's row of the context and the
reward go into the replay memory, which the population shares (as the reference's). Once
the memory holds ``batch_size`` rows, every pull is followed by ``learn_step`` updates on
uniformly sampled batches. A generation trains each member for ``training.evo_steps``
pulls; the generation loop then evaluates members greedily (``eval_steps`` pulls, default
100: fitness is the reward collected) and evolves them.

Per generation the report carries the member's cumulative ``regret`` (``1 - reward`` per
pull, summed over all its pulls so far) and ``accuracy`` (the share of this generation's
pulls that earned the best reward, 1).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from agilerl.core.member_training import Agent, TrainReport
from agilerl.training.experience import TrainedMember

if TYPE_CHECKING:
    from agilerl.core.replay_memory import TransitionMemory


class ContextualBandit(Protocol):
    """A bandit env: ``reset`` gives the first context (from ``seed=`` where it takes one),
    ``step(arm)`` the pulled arm's reward and the next context."""

    def reset(self, seed: int | None = None) -> np.ndarray: ...

    def step(self, action: int) -> tuple[np.ndarray, float]: ...


class BanditMember(TrainedMember, Protocol):
    """A member as the bandit loop drives it (NeuralUCB, NeuralTS)."""

    arms: int
    batch_size: int
    learn_step: int
    regret: list[float]

    def get_action(self, context: np.ndarray) -> int: ...

    def learn(self, experiences: Mapping[str, np.ndarray]) -> dict[str, float]: ...

    def record_regret(self, regret: float) -> None: ...


class BanditMemberTrainer:
    """``train(agent, pulls, seed)``: the env is reset from ``seed`` first, and batches
    are sampled with a generator seeded from it, so a call repeats exactly."""

    def __init__(self, env: object, memory: TransitionMemory) -> None:
        self.env = cast(ContextualBandit, env)  # a bandit run's env
        self.memory = memory

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        member = cast(BanditMember, agent)  # the members of a bandit run
        start = time.perf_counter()
        env, memory = self.env, self.memory
        rng = np.random.default_rng(seed)
        context = _reset(env, seed)
        learn: list[float] = []
        rewards = np.zeros(int(steps), dtype=np.float64)
        for i in range(int(steps)):
            arm = member.get_action(context)
            next_context, reward = env.step(arm)
            row = np.asarray(context, dtype=np.float32).reshape(member.arms, -1)[arm]
            memory.add(obs=row[None], reward=np.asarray([reward], dtype=np.float32))
            if len(memory) >= member.batch_size:
                for _ in range(int(member.learn_step)):
                    learn.append(member.learn(memory.sample(member.batch_size, rng=rng))["loss"])
            rewards[i] = float(reward)
            member.record_regret(1.0 - float(reward))
            context = next_context
        member.steps[-1] += int(steps)
        metrics = {"regret": float(member.regret[-1]),
                   "accuracy": float(np.mean(rewards == 1.0)) if len(rewards) else np.nan}
        if learn:
            metrics["loss"] = float(np.mean(learn))
        score = float(rewards.sum())
        member.scores.append(score)
        return TrainReport(steps=int(steps), score=score, metrics=metrics,
                           seconds=time.perf_counter() - start)


def _reset(env: ContextualBandit, seed: int) -> np.ndarray:
    """Reset from ``seed``; a custom env whose ``reset`` takes no seed is reset plainly."""
    try:
        return env.reset(seed=seed)
    except TypeError:
        return env.reset()
