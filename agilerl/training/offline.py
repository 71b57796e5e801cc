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
from collections.abc import Generator
from typing import TYPE_CHECKING, cast

import numpy as np

from agilerl.core.member_training import Agent, TrainReport
from agilerl.training.arguments import explained
from agilerl.training.experience import (
    LearnPoint,
    MemberResult,
    OffPolicyMember,
    drive_member_run,
    learn_at,
    mean_metrics,
)

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.training.trainer import LocalTrainer


def load_dataset(trainer: LocalTrainer) -> OfflineDataset:
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

    def __init__(self, dataset: OfflineDataset) -> None:
        self.dataset = dataset

    #: Lockstep members need no env of their own (see agilerl.population.lockstep).
    uses_env = False

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        start = time.perf_counter()
        member = cast(OffPolicyMember, agent)  # the members of an offline run (CQN)
        run = self.run(member, steps, seed=seed)
        report = self.report(drive_member_run(run, lambda point: learn_at(member, point)))
        report.seconds = time.perf_counter() - start
        return report

    def run(self, agent: OffPolicyMember, steps: int, *, seed: int, env: object = None,
            memory: OfflineDataset | None = None
            ) -> Generator[LearnPoint, dict[str, float], MemberResult]:
        """The call as a generator that yields a :class:`LearnPoint` (sample a batch of the
        dataset with its ``rng``) before every update and is sent the update's metrics."""
        rng = np.random.default_rng(seed)
        dataset = self.dataset if memory is None else memory
        batches = PrefetchedBatches(dataset, int(steps))
        metrics: list[dict[str, float]] = []
        for _ in range(int(steps)):
            metrics.append((yield LearnPoint(batches, rng, 0, None)))
        agent.steps[-1] += int(steps)
        return {"steps": int(steps), "metrics": mean_metrics(metrics)}

    @staticmethod
    def report(result: MemberResult) -> TrainReport:
        return TrainReport(steps=int(result["steps"]), metrics=dict(result["metrics"]))



#: Rows gathered ahead at most (all fields of a transition count as one row per
#: observation element), so a chunk of an image dataset stays a few MB.
PREFETCH_ELEMENTS = 1 << 20
#: Batches gathered ahead at most.
PREFETCH_BATCHES = 64


class PrefetchedBatches:
    """``sample(batch_size, rng)`` of a dataset, answered from batches drawn ahead in
    chunks (one index draw and one gather per field for a chunk, instead of per update).

    The batches are those the dataset's :meth:`~OfflineDataset.batches` draws with the
    same ``rng``, so a member call's updates depend only on its seed; at most ``total``
    batches are drawn.
    """

    read_only = True

    def __init__(self, dataset: OfflineDataset, total: int) -> None:
        self.dataset = dataset
        self.remaining = int(total)
        self._ready: list[dict[str, torch.Tensor]] = []
        self._batch_size = -1

    def __len__(self) -> int:
        return len(self.dataset)

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        """The next batch of ``batch_size`` transitions."""
        if not self._ready or batch_size != self._batch_size:
            self._batch_size = int(batch_size)
            per_row = max(1, 2 * int(np.prod(self.dataset.observation_shape)) + 3)
            count = min(PREFETCH_BATCHES, max(1, self.remaining),
                        max(1, PREFETCH_ELEMENTS // (per_row * self._batch_size)))
            self._ready = self.dataset.batches(self._batch_size, count, rng)
            self._ready.reverse()
        self.remaining -= 1
        return self._ready.pop()
