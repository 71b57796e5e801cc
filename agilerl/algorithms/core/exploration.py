"""How off-policy agents explore, as the experience loop sees it.

The loop knows no exploration method: each step it asks the agent for an action with
``agent.explore_action(obs, vector_step, settings)`` and, when sub-envs finish an episode,
tells it with ``agent.on_episode_end(ended)`` (where action noise is reset). ``settings``
is what the agent's class made of the run's ``training`` section once per call
(``exploration_settings(training)``): the DQN family's epsilon schedule, nothing for
agents that explore by their own action noise or noisy networks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agilerl.models.training import TrainingSpec


@dataclass(frozen=True)
class EpsilonSchedule:
    """Epsilon-greedy schedule: ``max(end, start * decay ** vector_steps)``.

    The schedule is a function of the member's own vector-step count
    (``agent.steps[-1] // num_envs``), so it carries over across generations, through
    cloning and checkpoints, without separate state.
    """

    start: float
    end: float
    decay: float

    def value(self, vector_steps: int) -> float:
        return max(self.end, self.start * self.decay**vector_steps)


def epsilon_schedule(training: TrainingSpec | None) -> EpsilonSchedule:
    """The epsilon schedule of a ``TrainingSpec``; a null field takes the value the schema
    gives it (``x-null-means`` of ``training.eps_*``)."""
    from agilerl.models._generated import NULL_MEANS

    means = NULL_MEANS["TrainingSpec"]

    def pick(name: str) -> float:
        value = getattr(training, name, None)
        return float(means[name] if value is None else value)  # type: ignore[arg-type]

    return EpsilonSchedule(start=pick("eps_start"), end=pick("eps_end"), decay=pick("eps_decay"))
