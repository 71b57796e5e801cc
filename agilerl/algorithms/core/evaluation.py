"""Greedy evaluation of an agent on a vector env (the fitness of a population member)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import torch

from agilerl.algorithms.core.autoreset import VectorEnv


class GreedyActor(Protocol):
    """What evaluation uses of an agent: ``greedy_action(obs)``, or for a recurrent policy
    ``greedy_action(obs, hidden)`` with the state of :meth:`initial_hidden`."""

    def initial_hidden(self, num_envs: int) -> dict[str, torch.Tensor] | None: ...

    @property
    def greedy_action(self) -> Callable[..., np.ndarray]: ...


def evaluate_greedy(
    agent: GreedyActor, env: VectorEnv, *, max_steps: int | None = None, loop: int = 1,
    seed: int | None = None,
) -> float:
    """Mean return of ``loop`` rounds of one greedy episode per sub-env.

    Each round resets the env (the first with ``seed``), then steps every sub-env with
    ``agent.greedy_action`` until it finishes its first episode; sub-envs that finished
    are no longer counted (so autoreset, in any mode, never mixes episodes). With
    ``max_steps`` a round stops after that many vector steps and unfinished episodes
    count with their partial return. Fitness = mean over sub-envs and rounds.

    A recurrent agent (``agent.initial_hidden`` not None) starts each round from a zero
    state, which ``greedy_action`` advances step by step.
    """
    num_envs = int(env.num_envs)
    totals: list[float] = []
    for round_index in range(max(1, int(loop))):
        obs, _ = env.reset(seed=seed if round_index == 0 else None)
        hidden = agent.initial_hidden(num_envs)
        returns = np.zeros(num_envs, dtype=np.float64)
        running = np.ones(num_envs, dtype=bool)
        steps = 0
        while running.any() and (max_steps is None or steps < max_steps):
            action = agent.greedy_action(obs) if hidden is None else agent.greedy_action(obs, hidden)
            obs, reward, terminated, truncated, _ = env.step(action)
            returns += np.where(running, np.asarray(reward, dtype=np.float64), 0.0)
            running &= ~(np.asarray(terminated) | np.asarray(truncated))
            steps += 1
        totals.extend(returns.tolist())
    return float(np.mean(totals))
