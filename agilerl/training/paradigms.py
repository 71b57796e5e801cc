"""Training loop name -> how :class:`~agilerl.training.trainer.LocalTrainer` runs it.

An algorithm's loop is the ``training_loop`` of its generated registry entry
(``schemas/algorithms/<name>.schema.json`` -> ``x-agilerl``); :data:`PARADIGMS` is the one
place that maps a loop to its member trainer and says whether it needs a replay memory.
An algorithm trains here when its loop is listed and it has an implementation
(:func:`agilerl.algorithms.algorithm_class`); anything else is refused when the trainer is
built, as are settings its implementation does not honour.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.core.algorithm_spec import algo_meta, algo_name
from agilerl.core.errors import UnsupportedAlgorithmError
from agilerl.core.member_training import MemberTrainer, RunContext

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.algorithms.core.hyperparameters import SpecHyperparameters
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.core.member_training import Agent
    from agilerl.core.replay_memory import TransitionMemory
    from agilerl.models.algo import AlgoSpec
    from agilerl.models.hpo import MutationSpec
    from agilerl.models.training import TrainingSpec
    from agilerl.training.llm import LLMRunParts
    from agilerl.training.trainer import LocalTrainer


@dataclass(frozen=True)
class Paradigm:
    """How one training loop runs: its member trainer, and whether it keeps a replay memory."""

    replay_memory: bool
    member_trainer: Callable[[RunContext], MemberTrainer]
    """``context -> train(agent, steps, *, seed)`` (the population seam's half)."""
    make_env: Callable[[LocalTrainer], LLMRunParts] | None = None
    """``trainer -> the env and what the trainer keeps of it`` when the loop builds its own
    environment (LLM); None: the env spec's vector env."""
    make_population: Callable[[LocalTrainer], list[Agent]] | None = None
    """``trainer -> members`` when the loop builds its own members (LLM adapters over a
    shared base); None: ``build_algorithm`` per slot."""
    memory: Callable[[LocalTrainer], ReplayBuffer | OfflineDataset] | None = None
    """``trainer -> memory`` when the loop's memory is not a replay buffer (the offline
    loop's dataset), built with the trainer; it becomes ``trainer.memory``."""
    joint_memory: bool = False
    """The replay memory stores joint multi-agent transitions (``MultiAgentReplayBuffer``)."""
    usable_mutations: Callable[[MutationSpec | None], MutationSpec | None] | None = None
    """``mutation section -> the one the loop's members can take`` (LLM adapters: no network
    mutations); None: the section as given."""

    @property
    def runs_in_workers(self) -> bool:
        """Members can usefully train in worker processes: not when the loop builds its own
        env and members (LLM adapters over one shared base model, which every worker would
        load again), so ``training.num_workers: 0`` keeps those in this process."""
        return self.make_env is None and self.make_population is None


def _replay_memory(context: RunContext) -> TransitionMemory:
    """The run's replay memory (a loop with ``replay_memory`` is built with one)."""
    memory = context.memory
    assert isinstance(memory, ReplayBuffer)
    return memory


def _off_policy(context: RunContext) -> MemberTrainer:
    from agilerl.training.off_policy import OffPolicyMemberTrainer

    return OffPolicyMemberTrainer(context.env, _replay_memory(context), context.training_spec)


def _on_policy(context: RunContext) -> MemberTrainer:
    from agilerl.training.on_policy import OnPolicyMemberTrainer

    return OnPolicyMemberTrainer(context.env, int(context.training_spec.max_steps))


def _llm_reasoning(context: RunContext) -> MemberTrainer:
    from agilerl.training.llm import reasoning_member_trainer

    return reasoning_member_trainer(context)


def _llm_env(trainer: LocalTrainer) -> LLMRunParts:
    from agilerl.training.llm import make_llm_env

    return make_llm_env(trainer)


def _llm_mutations(mutation: MutationSpec | None) -> MutationSpec | None:
    from agilerl.training.llm import network_mutations_off

    return network_mutations_off(mutation)


def _llm_population(trainer: LocalTrainer) -> list[Agent]:
    from agilerl.training.llm import make_llm_population

    return make_llm_population(trainer)


def _llm_dataset(context: RunContext) -> MemberTrainer:
    from agilerl.training.llm_dataset import dataset_member_trainer

    return dataset_member_trainer(context)


def _llm_dataset_env(trainer: LocalTrainer) -> LLMRunParts:
    from agilerl.training.llm_dataset import make_dataset_llm_env

    return make_dataset_llm_env(trainer)


def _offline(context: RunContext) -> MemberTrainer:
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.training.offline import OfflineMemberTrainer

    _warn_inert(context.training_spec, "learning_delay",
                "offline training takes no env steps; every update samples the dataset")
    dataset = context.memory
    assert isinstance(dataset, OfflineDataset)  # the loop's memory (Paradigm.memory)
    return OfflineMemberTrainer(dataset)


def _warn_inert(training: TrainingSpec, field: str, why: str) -> None:
    """Warn when ``training.<field>`` is set to what this loop does not read."""
    value = getattr(training, field, None)
    if value is not None and value != type(training).model_fields[field].default:
        warnings.warn(f"training.{field} = {value!r} has no effect: {why}", UserWarning,
                      stacklevel=5)


def _offline_dataset(trainer: LocalTrainer) -> OfflineDataset:
    from agilerl.training.offline import load_dataset

    return load_dataset(trainer)


def _bandits(context: RunContext) -> MemberTrainer:
    from agilerl.training.bandit import BanditMemberTrainer

    _warn_inert(context.training_spec, "episode_steps",
                "a generation is training.evo_steps pulls per member")
    _warn_inert(context.training_spec, "learning_delay",
                "bandits learn once the memory holds a batch")
    return BanditMemberTrainer(context.env, _replay_memory(context))


def _multi_agent_on_policy(context: RunContext) -> MemberTrainer:
    from agilerl.training.multi_agent_on_policy import MultiAgentOnPolicyMemberTrainer

    return MultiAgentOnPolicyMemberTrainer(context.env, int(context.training_spec.max_steps))


def _multi_agent_off_policy(context: RunContext) -> MemberTrainer:
    from agilerl.training.multi_agent_off_policy import MultiAgentOffPolicyMemberTrainer

    memory = context.memory
    assert isinstance(memory, MultiAgentReplayBuffer)  # the loop's joint memory
    return MultiAgentOffPolicyMemberTrainer(context.env, memory, context.training_spec)


PARADIGMS: dict[str, Paradigm] = {
    "off_policy": Paradigm(replay_memory=True, member_trainer=_off_policy),
    "on_policy": Paradigm(replay_memory=False, member_trainer=_on_policy),
    "llm_reasoning": Paradigm(replay_memory=False, member_trainer=_llm_reasoning,
                              make_env=_llm_env, make_population=_llm_population,
                              usable_mutations=_llm_mutations),
    "llm_preference": Paradigm(replay_memory=False, member_trainer=_llm_dataset,
                               make_env=_llm_dataset_env, make_population=_llm_population,
                               usable_mutations=_llm_mutations),
    "llm_sft": Paradigm(replay_memory=False, member_trainer=_llm_dataset,
                        make_env=_llm_dataset_env, make_population=_llm_population,
                        usable_mutations=_llm_mutations),
    "offline": Paradigm(replay_memory=False, member_trainer=_offline, memory=_offline_dataset),
    "bandits": Paradigm(replay_memory=True, member_trainer=_bandits),
    "multi_agent_on_policy": Paradigm(replay_memory=False, member_trainer=_multi_agent_on_policy),
    "multi_agent_off_policy": Paradigm(replay_memory=True, member_trainer=_multi_agent_off_policy,
                                       joint_memory=True),
}
"""Registry ``training_loop`` -> paradigm (loops missing here cannot train yet)."""


@dataclass(frozen=True)
class MemberTrainerFactory:
    """Picklable ``context -> member trainer`` of one loop, for backends that build member
    trainers in other processes."""

    loop: str

    def __call__(self, context: RunContext) -> MemberTrainer:
        return PARADIGMS[self.loop].member_trainer(context)


def trainable() -> list[str]:
    """Registered algorithms this version can train (implemented, with a known loop)."""
    from agilerl.algorithms import implemented
    from agilerl.models import ALGO_REGISTRY

    return [name for name in implemented()
            if name in ALGO_REGISTRY
            and getattr(ALGO_REGISTRY[name], "training_loop", None) in PARADIGMS]


def resolve_paradigm(spec: AlgoSpec) -> str:
    """The training loop of an algorithm spec; refuses what this version cannot train,
    and settings its implementation would ignore (:class:`UnsupportedAlgorithmError`)."""
    from agilerl.algorithms import NotImplementedAlgorithmError, algorithm_class

    name = algo_name(spec)
    loop = str(algo_meta(spec, "training_loop", "") or "")
    try:
        cls = algorithm_class(name) if loop in PARADIGMS else None
    except NotImplementedAlgorithmError:
        cls = None
    if cls is None:
        raise UnsupportedAlgorithmError(
            f"algorithm {name!r} is not implemented yet in this version of agilerl "
            f"(LocalTrainer trains: {', '.join(trainable())})"
        )
    check_settings(cls, spec)
    return loop


def check_settings(cls: type[SpecHyperparameters], spec: AlgoSpec) -> None:
    """Refuse (or warn about) algorithm settings ``cls`` does not honour, naming the field."""
    refused, ignored = cls.settings_not_honoured(spec)
    if refused:
        field, why = refused[0]
        raise UnsupportedAlgorithmError(
            f"algorithm.{field} = {_shown(getattr(spec, field))}: {why}"
            + "".join(f"; also algorithm.{f}: {w}" for f, w in refused[1:])
        )
    for field, why in ignored:
        warnings.warn(f"algorithm.{field} = {_shown(getattr(spec, field))} has no effect: {why}",
                      UserWarning, stacklevel=4)


def _shown(value: object) -> str:
    """A setting as a message shows it: plain values by repr, objects (a module) by type."""
    if value is None or isinstance(value, str | int | float | bool | list | tuple | dict):
        return repr(value)
    return f"<{type(value).__name__}>"


def paradigm(name: str) -> Paradigm:
    """The :class:`Paradigm` of a loop name returned by :func:`resolve_paradigm`."""
    return PARADIGMS[name]
