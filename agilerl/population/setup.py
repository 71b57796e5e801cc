"""What every population backend is built from: :class:`PopulationSetup`.

It holds the run's members and parts as the driver has them, and the picklable factories
another process rebuilds its own env and member trainer with; :meth:`PopulationSetup.context`
is the driver's :class:`~agilerl.core.member_training.RunContext`, the one a worker process
or Ray actor completes with its own replicas (:meth:`~RunContext.portable`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agilerl.core.member_training import (
    Agent,
    Deadline,
    EnvFactory,
    MemberTrainerFactory,
    RunContext,
)
from agilerl.population.backend import MemberEnv

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.components.replay_buffer import ReplayBuffer
    from agilerl.models.training import TrainingSpec
    from agilerl.population.shared_memory import ExperienceDelta, ExperienceDeltaState


@dataclass
class PopulationSetup:
    """Everything a backend is built from."""

    agents: list[Agent]
    """The members, slot order (their ``get_state``/``from_state`` move them between processes)."""
    env: MemberEnv
    """The driver's vector env (the local backend trains and evaluates on it)."""
    env_factory: EnvFactory
    """Picklable: builds an env equivalent to ``env`` (same spec and construction seed)."""
    member_trainer_factory: MemberTrainerFactory
    """Picklable: the paradigm's ``train(agent, steps, *, seed)`` for a context."""
    training_spec: TrainingSpec
    algorithm_spec: object = None
    paradigm: str = ""
    memory: ReplayBuffer | OfflineDataset | None = None
    """The driver's shared replay memory (off-policy paradigms), else None; picklable, so
    a worker starts from a copy of it."""
    pending_experience: list[ExperienceDelta | ExperienceDeltaState] = field(
        default_factory=list)
    """Members' memory deltas of a training phase interrupted after they trained (from a
    checkpoint's replay state, key ``pending_experience``; see :mod:`.shared_memory`)."""
    eval_steps: int | None = None
    eval_loop: int = 1
    seed: int = 0
    """The run seed (every call's own seed is derived from it by the loop)."""
    torch_threads: int | None = 1
    """Torch intra-op threads per member while it trains (each worker's setting)."""
    device: str = "cpu"
    deadline: Deadline | None = None
    """The run's wall-clock budget (None: none), which every member trainer's context
    carries."""
    worker_processes: bool = True
    """The paradigm's members can train in worker processes (False: LLM adapters over one
    shared base model, which every worker would have to load again)."""
    extra: dict[str, object] = field(default_factory=dict)

    def context(self) -> RunContext:
        """The driver-side :class:`~agilerl.core.member_training.RunContext`."""
        return RunContext(env=self.env, memory=self.memory, training_spec=self.training_spec,
                          algorithm_spec=self.algorithm_spec, paradigm=self.paradigm,
                          seed=self.seed, device=self.device, deadline=self.deadline)
