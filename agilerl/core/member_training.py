"""What a population backend and a training loop agree on: the member trainer's call, its
report, the run's deadline, and the :class:`RunContext` a member trainer is built from.

The population backends (local, worker processes, Ray) run member trainers without knowing
the loop; the loops (``agilerl.training``) build them without knowing where they run.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agilerl.core.value_types import JsonScalar

if TYPE_CHECKING:
    import torch
    from typing_extensions import Self  # typing.Self from Python 3.11

    from agilerl.core.replay_memory import ReplayMemory
    from agilerl.models.training import TrainingSpec
    from agilerl.networks.base import EvolvableNetwork


@dataclass
class TrainReport:
    """What one ``train(member, steps)`` call did."""

    steps: int
    """Environment steps taken (summed over sub-envs)."""
    score: float = math.nan
    """Mean return of the training episodes that finished (NaN when none did)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Algorithm metrics averaged over the learning updates (e.g. ``loss``)."""
    seconds: float = 0.0
    """Wall time of the call."""


class Deadline:
    """The moment a run's wall-clock budget (``training.max_wall_seconds``) is spent.

    Each run makes its own, and it travels in the run's :class:`RunContext` to wherever a
    member trains: pickled, it is the seconds left, so it means the same moment in a worker
    process or on another machine of a Ray cluster, whatever their clocks say.
    """

    __slots__ = ("_at",)

    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + float(seconds)

    def seconds_left(self) -> float:
        return self._at - time.monotonic()

    def spent(self) -> bool:
        return time.monotonic() >= self._at

    def __reduce__(self) -> tuple[type[Deadline], tuple[float]]:
        return Deadline, (self.seconds_left(),)

    def __repr__(self) -> str:
        return f"Deadline(seconds_left={self.seconds_left():.3f})"


@runtime_checkable
class Agent(Protocol):
    """A population member as the backends, mutation and selection see it. Every RL and LLM
    algorithm is one by declaration (:class:`~agilerl.algorithms.core.member_state.MemberState`
    subclasses it), so its attributes are stated here only."""

    index: int
    device: torch.device
    hp_config: dict[str, dict[str, float]]
    """Mutation bounds of the hyperparameters ``rl_hp_selection`` names (name -> ``min``,
    ``max``, ``grow_factor``, ``shrink_factor``)."""
    steps: list[int]
    """Env steps trained so far (the last entry is the current count)."""
    scores: list[float]
    fitness: list[float]
    mut: str
    """The last mutation applied (its kind), for logs and lineage."""

    @property
    def hyperparameters(self) -> dict[str, JsonScalar]: ...

    def test(self, env: Any, max_steps: int | None = None, loop: int = 1,
             seed: int | None = None) -> float:
        """Greedy evaluation on ``env``; appends the result to ``fitness``. The env's kind is
        the member class's own (a vector env, a multi-agent or bandit env, an LLM env: each
        implementation names its own), so none is stated here."""
        ...

    def get_state(self) -> dict[str, object]: ...

    @classmethod
    def from_state(cls, state: Mapping[str, object],
                   device: str | torch.device | None = None) -> Self: ...

    def set_state(self, state: Mapping[str, object]) -> None: ...

    def clone(self, index: int | None = None) -> Self: ...

    def set_hyperparameter(self, name: str, value: float) -> None: ...

    def mutable_hyperparameters(self) -> tuple[str, ...]: ...

    def mutable_networks(self) -> list[str]:
        """The networks architecture and parameter mutations may change (none for a LoRA
        adapter)."""
        ...

    def save_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Save the member as an agent file (the run's elite)."""
        ...


@runtime_checkable
class EvolvableAgent(Agent, Protocol):
    """A member whose networks evolve (every RL algorithm; LLM adapters evolve only their
    hyperparameters)."""

    networks: dict[str, EvolvableNetwork]
    """Its networks by name (targets included)."""

    def trained_networks(self) -> list[str]: ...

    def apply_architecture_mutation(self, network_name: str, plan: Mapping[str, object]) -> None: ...

    def restart_targets_and_optimizers(self) -> None: ...


class MemberTrainer(Protocol):
    """Collects experience for one member and lets it learn: the paradigm-specific half.

    It is built from the run's :class:`RunContext`; a call gets only what is the call's own.
    """

    def __call__(self, agent: Agent, steps: int, *, seed: int) -> TrainReport:
        """Train ``agent`` for about ``steps`` steps from ``seed`` (the call's seed); a
        trainer whose steps are long may return early, between two steps, once its
        context's ``deadline`` is spent."""
        ...


class EnvFactory(Protocol):
    """Builds an environment equivalent to the run's (same spec and construction seed);
    picklable, so another process can build its own replica."""

    def __call__(self) -> object:
        """The env (its kind is the paradigm's: a vector env, a multi-agent or bandit env,
        an LLM env)."""
        ...


@dataclass(frozen=True)
class RunContext:
    """What a member trainer is built from: the run's parts a training loop reads.

    In the driver these are the trainer's own objects. A worker process or Ray actor gets
    the driver's context without the env and memory (:meth:`portable`) and puts in its own
    replicas of them (``dataclasses.replace``); every other field is the driver's, so each
    place a member trains reads the same values (the deadline, pickled as the seconds left,
    names the same moment, give or take the time a starting worker takes to read it).

    The context holds what every call of a run shares (the run seed, the device, the
    deadline); :meth:`MemberTrainer.__call__` gets only what differs between calls: the
    member, its steps and the call's seed, which the generation loop derives from the run
    seed, the generation, the member and the phase.
    """

    env: object
    """The vector env the member trainer steps (its kind is the paradigm's: a vector env, a
    multi-agent or bandit env, an LLM env)."""
    memory: ReplayMemory[object] | None
    """The replay memory (off-policy and bandit loops), the dataset (offline), else None."""
    training_spec: TrainingSpec
    """The manifest's ``training`` section (``TrainingSpec``)."""
    algorithm_spec: object = None
    """The manifest's ``algorithm`` section."""
    paradigm: str = ""
    """The registry ``training_loop`` the members train with."""
    seed: int = 0
    """The run seed (each call's own seed is derived from it by the generation loop)."""
    device: str = "cpu"
    """The torch device the members live on (where a worker loads the members it is sent)."""
    deadline: Deadline | None = None
    """The run's wall-clock budget (``training.max_wall_seconds``): a member trainer may
    stop between its own steps once it is spent (None: no budget)."""

    def portable(self) -> RunContext:
        """This context for another process: without this process's env and memory, which
        that process replaces with its own replicas."""
        return replace(self, env=None, memory=None)


MemberTrainerFactory = Callable[[RunContext], MemberTrainer]
"""``context -> member trainer``: picklable, so a worker process builds its own."""
