"""Offline paradigm (CQN): gradient updates on a fixed dataset, evaluated online.

A member's "steps" here are **gradient updates**, as in the reference: one generation
trains every member for ``training.evo_steps`` updates (one batch of ``batch_size``
transitions each), and ``training.max_steps`` caps each member's updates. The env is
never stepped for training; the generation loop evaluates members greedily on the
manifest's Gymnasium environment. The dataset (:mod:`agilerl.components.offline_dataset`)
is loaded once, when the trainer is built, and shared by the population; it is read-only,
so a checkpoint records only which dataset it was (an exact resume needs nothing more).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from agilerl.population.backend import TrainReport
from agilerl.training.arguments import explained


def load_dataset(trainer: Any) -> Any:
    """The dataset of the trainer's ``OfflineEnvSpec``, checked against its env's spaces.

    Up to ``replay_buffer.max_size`` transitions are kept in RAM; a larger dataset is
    memory-mapped from a temporary file. Problems with the data are reported as setup
    errors naming the file and the key.
    """
    from agilerl.components.offline_dataset import load_offline_dataset

    env, spec = trainer.env, trainer.env_spec
    obs_space = getattr(env, "single_observation_space", None) or env.observation_space
    action_space = getattr(env, "single_action_space", None) or env.action_space
    buffer = trainer.replay_buffer_spec
    if buffer is None:
        from agilerl.models import ReplayBufferSpec

        buffer = ReplayBufferSpec()
    with explained(f"the offline dataset of environment {trainer._env_label()}",
                   environment=True):
        return load_offline_dataset(spec, obs_space, action_space, int(buffer.max_size))


class OfflineMemberTrainer:
    """``train(agent, updates, seed)``: ``updates`` gradient steps on dataset batches."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __call__(self, agent: Any, steps: int, *, seed: int) -> TrainReport:
        start = time.perf_counter()
        rng = np.random.default_rng(seed)
        metrics: list[dict[str, float]] = []
        for _ in range(int(steps)):
            metrics.append(agent.learn(self.dataset.sample(agent.batch_size, rng)))
        agent.steps[-1] += int(steps)
        return TrainReport(steps=int(steps), metrics=_mean(metrics),
                           seconds=time.perf_counter() - start)


def _mean(metrics: list[dict[str, float]]) -> dict[str, float]:
    if not metrics:
        return {}
    return {k: float(np.mean([m[k] for m in metrics])) for k in metrics[0]}
