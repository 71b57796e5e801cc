"""Members living in this process, trained one after the other."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from agilerl.checkpoint.rng import seed_everything
from agilerl.core.member_training import Agent, MemberTrainer, TrainReport
from agilerl.population.backend import MemberEnv, MutationOperator, SequentialCalls
from agilerl.population.shared_memory import (
    ExperienceDelta,
    ExperienceDeltaState,
    SharedReplay,
    shareable,
)

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.components.replay_buffer import ReplayBuffer
    from agilerl.population.setup import PopulationSetup


class LocalPopulation(SequentialCalls):
    """A list of agents plus the env they are evaluated on, behind the backend protocol.

    Before every ``train`` and ``evaluate`` call the process-wide generators (python, numpy,
    torch) are seeded from the ``seed`` the loop passes, so each member's work depends only
    on its own state and that seed: the result does not depend on which members ran before
    it in this process, which is what makes resume exact and lets a parallel backend
    reproduce a sequential run.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        env: MemberEnv,
        train_member: MemberTrainer,
        *,
        eval_steps: int | None = None,
        eval_loop: int = 1,
        memory: ReplayBuffer | OfflineDataset | None = None,
        pending: Sequence[ExperienceDelta | ExperienceDeltaState] = (),
    ) -> None:
        self.agents: list[Agent] = list(agents)
        self.env = env
        self.train_member = train_member
        self.eval_steps = eval_steps
        self.eval_loop = eval_loop
        self.memory = memory
        #: The generation rule for a memory shared by several members (see shared_memory).
        self.shared: SharedReplay | None = (
            SharedReplay(memory, pending) if len(self.agents) > 1 and shareable(memory) else None
        )

    @classmethod
    def from_setup(cls, setup: PopulationSetup) -> LocalPopulation:
        """The in-process backend for a :class:`~agilerl.population.setup.PopulationSetup`."""
        return cls(setup.agents, setup.env, setup.member_trainer_factory(setup.context()),
                   eval_steps=setup.eval_steps, eval_loop=setup.eval_loop, memory=setup.memory,
                   pending=setup.pending_experience)

    def __len__(self) -> int:
        return len(self.agents)

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        seed_everything(seed)
        start = time.perf_counter()
        if self.shared is not None:
            self.shared.begin_member()
        report = self.train_member(self.agents[member], steps, seed=seed)
        if self.shared is not None:
            self.shared.end_member()
        report.seconds = time.perf_counter() - start
        return report

    def end_training_phase(self) -> None:
        if self.shared is not None:
            self.shared.end_phase()

    def memory_state(self) -> Mapping[str, object] | None:
        if self.shared is not None:
            return self.shared.state_dict()
        return self.memory.state_dict() if self.memory is not None else None


    def evaluate(self, member: int, *, seed: int) -> float:
        seed_everything(seed)
        self.env.reset(seed=seed)  # later resets inside ``test`` continue from this seed
        return float(self.agents[member].test(self.env, max_steps=self.eval_steps,
                                              loop=self.eval_loop))

    def agents_here(self) -> list[Agent]:
        return self.agents

    def close(self) -> None:
        return None

    def get_state(self, member: int) -> dict[str, object]:
        return dict(self.agents[member].get_state())

    def set_state(self, member: int, state: Mapping[str, object]) -> None:
        agent = self.agents[member]
        self.agents[member] = type(agent).from_state(state, device=agent.device)

    def apply_mutation(
        self, operator: MutationOperator, *, pre_training: bool = False, members: Sequence[int] | None = None
    ) -> None:
        """Mutate the members (all, or the slots in ``members``) in slot order with
        ``operator`` (its own seeded RNG)."""
        if members is None:
            self.agents = list(operator.mutation(self.agents, pre_training_mut=pre_training))
            return
        slots = sorted(set(members))
        chosen = [self.agents[m] for m in slots]
        mutated = operator.mutation(chosen, pre_training_mut=pre_training,
                                    indices=[agent.index for agent in chosen])
        for slot, agent in zip(slots, mutated, strict=True):
            self.agents[slot] = agent

    def set_hyperparameters(self, member: int, values: Mapping[str, object]) -> None:
        agent = self.agents[member]
        current = agent.hyperparameters
        for name, value in values.items():
            if current.get(name) != value:
                # only a mutable (numeric) hyperparameter differs between members
                assert isinstance(value, int | float)
                agent.set_hyperparameter(name, value)

    def steps(self, member: int) -> int:
        return int(self.agents[member].steps[-1])

    def hyperparameters(self, member: int) -> dict[str, object]:
        return dict(self.agents[member].hyperparameters)
