"""The Ray actor of the Ray backend (:mod:`agilerl.population.ray_backend`): a group of
members with their own replica of the env and of the shared replay memory, running their
calls exactly as :class:`~agilerl.population.local.LocalPopulation` does. Every actor has a
slot for every member, so any actor can take over any member (the driver decides which
actor holds which member)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict, cast

import ray

from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.core.member_training import (
    Agent,
    EnvFactory,
    MemberTrainerFactory,
    RunContext,
    TrainReport,
)
from agilerl.population.backend import MemberEnv, MutationOperator
from agilerl.population.shared_memory import ExperienceDelta, SharedReplay, shareable

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.components.offline_dataset import DatasetState, OfflineDataset
    from agilerl.components.replay_buffer import ReplayState


class HostRecipe(TypedDict):
    """What every actor is built from (put in Ray's object store once)."""

    agent_class: type[Agent]
    env_factory: EnvFactory
    memory: ReplayBuffer | OfflineDataset | None
    shared: bool
    member_trainer_factory: MemberTrainerFactory
    eval_steps: int | None
    eval_loop: int
    torch_threads: int | None


class HostInfo(TypedDict, total=False):
    """What the driver keeps of a member after each call: its steps and hyperparameters
    (empty before the member's first call)."""

    steps: int
    hyperparameters: dict[str, object]


class MemberHost:
    """The actor: some members, their env and memory replicas, and the calls on them."""

    def __init__(self, recipe: HostRecipe, context: RunContext, slots: int) -> None:
        """``context``: the driver's run context without its env and memory, which are
        this actor's replicas here."""
        import torch

        from agilerl.population.local import LocalPopulation

        threads = recipe["torch_threads"]
        if threads:
            torch.set_num_threads(int(threads))
        self.agent_class = recipe["agent_class"]
        # the run's env, built by the trainer's env builder: every kind resets and closes
        self.env = cast(MemberEnv, recipe["env_factory"]())
        # Arrays from the object store are read-only views of it: the replica owns copies.
        self.memory = copy.deepcopy(recipe["memory"])
        #: the generation rule on this actor's memory replica (several members share it)
        self.shared = (SharedReplay(self.memory)
                       if recipe["shared"] and shareable(self.memory) else None)
        self.context = replace(context, env=self.env, memory=self.memory)
        # Seeding and calls as in one process; the memory rule is applied here, across
        # the whole population, not by this partial LocalPopulation (hence no memory).
        # every slot is filled by ``load`` before a call uses it
        placeholders = cast("list[Agent]", [None] * slots)
        self.members = LocalPopulation(
            placeholders, self.env, recipe["member_trainer_factory"](self.context),
            eval_steps=recipe["eval_steps"], eval_loop=recipe["eval_loop"])

    def _result(self, member: int) -> tuple[HostInfo, dict[str, object]]:
        agent = self.members.agents[member]
        info: HostInfo = {"steps": int(agent.steps[-1]),
                          "hyperparameters": dict(agent.hyperparameters)}
        return info, dict(agent.get_state())

    def load(self, member: int, state: Mapping[str, object],
             index: int | None = None) -> tuple[HostInfo, dict[str, object]]:
        own = copy.deepcopy(dict(state))  # own arrays, not read-only object-store views
        if index is not None:
            own["index"] = index
        self.members.agents[member] = self.agent_class.from_state(own,
                                                                 device=self.context.device)
        return self._result(member)

    def train(self, member: int, steps: int, seed: int
              ) -> tuple[TrainReport, ExperienceDelta | None, HostInfo, dict[str, object]]:
        """Train one member; also returns what it added to the shared memory (or None)."""
        if self.shared is not None:
            self.shared.begin_member()
        report = self.members.train(member, steps, seed=seed)
        delta = self.shared.end_member() if self.shared is not None else None
        return (report, delta, *self._result(member))

    def evaluate(self, member: int, seed: int) -> tuple[float, HostInfo, dict[str, object]]:
        fitness = self.members.evaluate(member, seed=seed)
        return (fitness, *self._result(member))

    def mutate(self, member: int, operator: MutationOperator, pre_training: bool,
               exempt: bool) -> tuple[MutationOperator, HostInfo, dict[str, object]]:
        """Mutate one member with ``operator`` as ``operator.mutation(population)`` would at
        this slot: an ``exempt`` member (the elite in slot 0) still draws its kind."""
        agent = self.members.agents[member]
        operator = copy.deepcopy(operator)
        if exempt:
            mutated = operator.mutation([agent], pre_training_mut=pre_training)
        else:
            mutated = operator.mutation([agent], pre_training_mut=pre_training,
                                        indices=[agent.index])
        self.members.agents[member] = mutated[0]
        return (operator, *self._result(member))

    def set_hyperparameters(self, member: int, values: Mapping[str, object]
                            ) -> tuple[HostInfo, dict[str, object]]:
        self.members.set_hyperparameters(member, values)
        return self._result(member)

    def node_id(self) -> str:
        """The Ray node this actor runs on."""
        return str(ray.get_runtime_context().get_node_id())

    def end_phase(self, *deltas: ExperienceDelta) -> None:
        """Merge every member's additions of this phase, in member order, into the replica."""
        if self.shared is not None:
            self.shared.end_phase(list(deltas))

    def memory_state(self) -> Mapping[str, object] | None:
        """The replica's state (with one member, the only copy of the memory)."""
        return self.memory.state_dict() if self.memory is not None else None

    def load_memory(self, state: Mapping[str, object]) -> None:
        assert self.memory is not None, "only an actor with a replay memory loads one"
        # the state of the driver's memory (or another replica's), of this memory's class
        restored = copy.deepcopy(dict(state))
        if isinstance(self.memory, ReplayBuffer):
            self.memory.load_state_dict(cast("ReplayState", restored))
        else:
            self.memory.load_state_dict(cast("DatasetState", restored))
        if self.shared is not None:
            self.shared = SharedReplay(self.shared.memory)
