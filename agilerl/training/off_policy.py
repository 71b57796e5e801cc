"""Off-policy paradigm (DQN, ...): the member trainer that fills a replay memory and learns.

The replay memory is shared by the whole population (as in the reference library): every
member's experience is available to every other member. Epsilon-greedy exploration follows
``training.eps_start/eps_end/eps_decay`` as a function of each member's own step count.
"""

from __future__ import annotations

import inspect
from typing import Any

from agilerl.population.backend import TrainReport
from agilerl.training.experience import EpsilonSchedule, train_off_policy_member

#: Loop defaults for a manifest that leaves ``training.eps_*`` null (spec §3.3).
EPS_START = 1.0
EPS_END = 0.01
EPS_DECAY = 0.999


def epsilon_schedule(training: Any) -> EpsilonSchedule:
    """The exploration schedule of a ``TrainingSpec`` (nulls take the loop defaults)."""

    def pick(value: Any, default: float) -> float:
        return default if value is None else float(value)

    return EpsilonSchedule(
        start=pick(getattr(training, "eps_start", None), EPS_START),
        end=pick(getattr(training, "eps_end", None), EPS_END),
        decay=pick(getattr(training, "eps_decay", None), EPS_DECAY),
    )


class OffPolicyMemberTrainer:
    """``train(agent, steps, seed)`` for off-policy agents: act, store, learn."""

    def __init__(self, env: Any, memory: Any, training: Any) -> None:
        self.env = env
        self.memory = memory
        self.learning_delay = int(getattr(training, "learning_delay", 0) or 0)
        self.epsilon = epsilon_schedule(training)

    def __call__(self, agent: Any, steps: int, *, seed: int) -> TrainReport:
        # Epsilon-greedy applies to agents whose get_action takes an epsilon (DQN-style);
        # others (e.g. DDPG) explore by their own noise.
        takes_epsilon = "epsilon" in inspect.signature(agent.get_action).parameters
        result = train_off_policy_member(
            agent, self.env, self.memory, steps, learning_delay=self.learning_delay,
            epsilon=self.epsilon if takes_epsilon else None, seed=seed,
        )
        return TrainReport(steps=int(result["steps"]), score=float(result["score"]),
                           metrics=dict(result["metrics"]))
