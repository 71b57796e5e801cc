"""Members in this process that train side by side, so that members with the same
architecture take their gradient steps together (``training.batched_updates``).

Each member's training call runs as a generator (the member trainer's ``run``: the
off-policy loop's :func:`~agilerl.training.experience.off_policy_member_run`, the on-policy
loop's :func:`~agilerl.training.experience.on_policy_member_run`, or the offline loop's
updates on its read-only dataset) that stops at every learning update. The members are
advanced in lockstep: every member runs until its next update, then the members waiting
for an update learn at once, one stacked update per architecture
(:mod:`agilerl.algorithms.stacked_groups`: a DQN or CQN gradient step, or a whole PPO
update on the member's rollout). A member still collects exactly the experience and
samples exactly the batches it would alone, because it keeps everything a sequential call
has to itself:

- (off-policy) its own env (the first member uses the driver's; the others, envs from the
  setup's factory, built once);
- (off-policy) its own view of the shared replay memory: the memory as the phase began plus
  its own rows (the generation rule of :mod:`.shared_memory`), a copy of the memory for
  every member after the first, whose additions become the member's delta as in a
  sequential run;
- its own random streams: the env's generators (reset from the member's seed), the agent's
  exploration generators (PPO: its numpy generator draws categorical actions, its torch
  generator Gaussian noise and minibatches), the batch sampler's generator (seeded from the
  member's seed), and
  torch's process-wide generator, seeded as
  :class:`~agilerl.population.local.LocalPopulation` seeds it and swapped in whenever the
  member runs (a microsecond). Python's and numpy's process-wide generators are seeded per
  member too but not swapped (saving and restoring numpy's costs ~0.4 ms, more than an
  update): the off-policy member call draws nothing from them, so only an env that draws
  from them itself would make a batched run differ from the sequential one (it would still
  be reproducible).

So every update of a batched run equals the sequential one's up to the float rounding of
the stacked update; a run long enough for a rounding difference to flip a greedy action then
goes its own way (as a run with another torch thread count does), and repeats exactly.
Members of an algorithm without a stacked update, or a prioritized memory, train one after
another as in :class:`~agilerl.population.local.LocalPopulation`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch

from agilerl.algorithms.stacked_groups import group_key, make_group
from agilerl.checkpoint.rng import seed_everything
from agilerl.components.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
from agilerl.core.errors import UnsupportedSettingError
from agilerl.core.member_training import Agent, EnvFactory, MemberTrainer, TrainReport
from agilerl.population.backend import MemberEnv, TrainJob
from agilerl.population.local import LocalPopulation
from agilerl.population.shared_memory import (
    ExperienceDelta,
    ExperienceDeltaState,
    SharedReplay,
)

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.population.setup import PopulationSetup


class UpdatePoint(Protocol):
    """Where a member's training call waits for a learning update (the off-policy loop's
    ``LearnPoint``, the on-policy loop's ``RolloutPoint``)."""

    def batch(self, agent: Agent) -> object:
        """What the member learns from at this update (its group's ``learn`` takes it)."""
        ...


class StackedLearner(Protocol):
    """The members of one architecture learning together
    (:func:`~agilerl.algorithms.stacked_groups.make_group`)."""

    # Each group learns from its own batch type (PPO: rollout buffers; DQN: sampled
    # batches), which only the group's key knows at run time.
    def learn(self, members: Sequence[int],
              batches: Sequence[Any]) -> list[dict[str, float]]: ...


class LockstepPopulation(LocalPopulation):
    """:class:`LocalPopulation` whose training phase advances the members together."""

    def __init__(self, agents: Sequence[Agent], env: MemberEnv, train_member: MemberTrainer,
                 *, env_factory: EnvFactory, eval_steps: int | None = None,
                 eval_loop: int = 1, memory: ReplayBuffer | OfflineDataset | None = None,
                 pending: Sequence[ExperienceDelta | ExperienceDeltaState] = ()) -> None:
        super().__init__(agents, env, train_member, eval_steps=eval_steps,
                         eval_loop=eval_loop, memory=memory, pending=pending)
        self.env_factory = env_factory
        self._envs: list[MemberEnv] = []  # envs of the 2nd, 3rd, ... member of a phase

    @classmethod
    def from_setup(cls, setup: PopulationSetup) -> LockstepPopulation:
        return cls(setup.agents, setup.env, setup.member_trainer_factory(setup.context()),
                   env_factory=setup.env_factory, eval_steps=setup.eval_steps,
                   eval_loop=setup.eval_loop, memory=setup.memory,
                   pending=setup.pending_experience)

    def batches_updates(self) -> bool:
        """Whether this phase's members can learn together (else they train in turn)."""
        # a replay memory the members write must be shared (so that it can be split per
        # member); a read-only dataset (offline) is sampled by every member as it is
        memory_ok = self.shared is not None or not isinstance(self.memory, ReplayBuffer)
        return (memory_ok and hasattr(self.train_member, "run")
                and not isinstance(self.memory, PrioritizedReplayBuffer)
                and all(group_key(agent) is not None for agent in self.agents))

    def train_members(
        self, jobs: Sequence[TrainJob], *, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[int, TrainReport]]:
        running = [job for job in jobs if job.steps]
        if len(running) < 2 or not self.batches_updates():
            yield from super().train_members(jobs, stop=stop)
            return
        if stop is not None and stop():
            return
        reports = dict(zip((job.member for job in running), self._lockstep(running),
                           strict=True))
        for job in jobs:
            yield job.member, reports.get(job.member, TrainReport(steps=0))

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []

    # ------------------------------------------------------------------ the phase
    def _lockstep(self, jobs: Sequence[TrainJob]) -> list[TrainReport]:
        start = time.perf_counter()
        envs: list[MemberEnv | None] = [None] * len(jobs)
        if getattr(self.train_member, "uses_env", True):
            while len(self._envs) < len(jobs) - 1:
                # the run's env kind (the trainer's env builder): it resets and closes
                self._envs.append(cast(MemberEnv, self.env_factory()))
            envs = [self.env, *self._envs[:len(jobs) - 1]]
        recorders: list[SharedReplay | None] = [None] * len(jobs)
        if self.shared is not None:
            # the 2nd, 3rd, ... member's memory: a copy of the memory as the phase begins
            recorders = [self.shared, *(SharedReplay(copy.deepcopy(self.shared.memory))
                                        for _ in jobs[1:])]
        members = [_Member(self, job, env, recorder)
                   for job, env, recorder in zip(jobs, envs, recorders, strict=True)]
        learners = _learners([m.agent for m in members])
        waiting = members
        while waiting:
            for member in waiting:
                member.advance()
            waiting = [m for m in members if m.point is not None]
            for group, chosen in _by_group(learners, waiting):
                batches = [m.point.batch(m.agent) for m in chosen]  # type: ignore[union-attr]
                metrics = group.learn([learners[id(m.agent)][1] for m in chosen], batches)
                for member, result in zip(chosen, metrics, strict=True):
                    member.metrics = result
        for member in members:  # merged at the phase's end in member order, as sequentially
            if member.recorder is not None and self.shared is not None:
                delta = member.recorder.end_member()
                if member.recorder is not self.shared:
                    self.shared.pending.append(delta)
        seconds = (time.perf_counter() - start) / len(members)
        reports = []
        for member in members:
            report = self.train_member.report(member.result)  # type: ignore[attr-defined]
            report.seconds = seconds
            reports.append(report)
        return reports


class _Member:
    """One member's training call, suspended between learning updates."""

    def __init__(self, population: LockstepPopulation, job: TrainJob, env: MemberEnv | None,
                 recorder: SharedReplay | None) -> None:
        self.agent = population.agents[job.member]
        self.recorder = recorder
        seed_everything(job.seed)
        self.torch_rng = torch.get_rng_state()
        if recorder is not None:
            recorder.begin_member()
        self.run = population.train_member.run(  # type: ignore[attr-defined]
            self.agent, job.steps, seed=job.seed, env=env,
            memory=recorder.memory if recorder is not None else None)
        self.point: UpdatePoint | None = None
        self.metrics: dict[str, float] | None = None
        self.result: dict[str, object] = {}

    def advance(self) -> None:
        """Run to the next learning update (``point``), or to the end (``result``)."""
        torch.set_rng_state(self.torch_rng)
        try:
            self.point = self.run.send(self.metrics)
        except StopIteration as finished:
            self.point, self.result = None, finished.value
        self.torch_rng = torch.get_rng_state()
        self.metrics = None


def _learners(agents: Sequence[Agent]) -> dict[int, tuple[StackedLearner, int]]:
    """id(agent) -> (its architecture's group, its index there)."""
    keyed: dict[Hashable, list[Agent]] = {}
    for agent in agents:
        keyed.setdefault(group_key(agent), []).append(agent)
    out: dict[int, tuple[StackedLearner, int]] = {}
    for members in keyed.values():
        group = make_group(members)
        for index, agent in enumerate(members):
            out[id(agent)] = (group, index)
    return out


def _by_group(learners: dict[int, tuple[StackedLearner, int]],
              members: Sequence[_Member]) -> list[tuple[StackedLearner, list[_Member]]]:
    groups: dict[int, tuple[StackedLearner, list[_Member]]] = {}
    for member in members:
        group = learners[id(member.agent)][0]
        groups.setdefault(id(group), (group, []))[1].append(member)
    return list(groups.values())


def refuse_unbatchable(setup: PopulationSetup, workers: int) -> None:
    """Raise :class:`UnsupportedSettingError` (naming ``training.batched_updates``) when the
    run cannot batch its members' updates."""
    field = "training.batched_updates"
    if workers > 1:
        raise UnsupportedSettingError(
            f"{field} trains the members side by side in one process; it cannot be combined "
            f"with {workers} worker processes (training.num_workers / --workers): use one")
    unsupported = sorted({type(agent).__name__ for agent in setup.agents
                          if group_key(agent) is None})
    if setup.paradigm not in ("off_policy", "offline", "on_policy") or unsupported:
        what = ", ".join(unsupported) or f"the {setup.paradigm!r} training loop"
        raise UnsupportedSettingError(
            f"{field}: {what} has no batched update in this version (supported: DQN, "
            "plain or double, CQN, and PPO that is not recurrent, with mlp encoders on "
            "vector observations); set it to false")
    if isinstance(setup.memory, PrioritizedReplayBuffer):
        raise UnsupportedSettingError(
            f"{field} does not support a prioritized replay memory; set it to false")
