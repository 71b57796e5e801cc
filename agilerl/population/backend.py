"""The backend protocol the generation loop is written against."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from agilerl.core.member_training import Agent, TrainReport


class MemberFailure(RuntimeError):
    """A member's process (worker, actor) died or raised; the run cannot continue.

    ``member`` is named by the backend, ``generation`` by the loop; the message names both.
    """

    def __init__(self, what: str, member: int | None = None,
                 worker_traceback: str | None = None) -> None:
        self.what = what
        self.member = member
        self.generation: int | None = None
        self.worker_traceback = worker_traceback
        super().__init__(what)

    def __str__(self) -> str:
        where = []
        if self.member is not None:
            where.append(f"member {self.member}")
        if self.generation is not None:
            where.append(f"generation {self.generation}")
        return f"{' of '.join(where) or 'the population'}: {self.what}"


class MemberEnv(Protocol):
    """What a backend does with an env itself: reset it from a seed before an evaluation,
    and close the envs it built (the member trainer and ``Agent.test`` do the rest)."""

    def reset(self, *, seed: int | None = None) -> object: ...

    def close(self) -> None: ...


class MutationOperator(Protocol):
    """A mutation operator (:class:`~agilerl.hpo.mutation.Mutations`) as backends apply it:
    ``mutation(population)`` mutates the members in slot order, with its own seeded RNG."""

    def mutation(self, population: Sequence[Agent], pre_training_mut: bool = False,
                 indices: Sequence[int] | None = None) -> list[Agent]: ...


class TrainJob(NamedTuple):
    """One member's share of a generation's training phase."""

    member: int
    steps: int
    seed: int


class EvalJob(NamedTuple):
    """One member's evaluation."""

    member: int
    seed: int


@runtime_checkable
class PopulationBackend(Protocol):
    """Members addressed by slot index ``0..len-1``."""

    def __len__(self) -> int: ...

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        """Train ``member`` for about ``steps`` env steps; the env is reset from ``seed``."""
        ...

    def evaluate(self, member: int, *, seed: int) -> float:
        """Evaluate ``member`` greedily (env reset from ``seed``); return and record fitness."""
        ...

    def train_members(
        self, jobs: Sequence[TrainJob], *, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[int, TrainReport]]:
        """Run ``jobs`` (ascending members of one generation), possibly concurrently, and
        yield ``(member, report)`` in job order. Once ``stop()`` is true no further job
        starts; jobs already started finish and are yielded, so the members yielded are
        always a prefix of ``jobs``. A job of 0 steps is not run (its report says 0 steps).

        With a shared replay memory every job sees the memory as it was when the
        generation's training phase began plus its own member's transitions (never a
        sibling's), so the result does not depend on how jobs are spread over workers.
        """
        ...

    def end_training_phase(self) -> None:
        """Every member has trained this generation: merge the experience they added to
        the shared memory, in member order (nothing to do without a shared memory)."""
        ...

    def evaluate_members(self, jobs: Sequence[EvalJob]) -> list[float]:
        """Evaluate ``jobs`` (possibly concurrently); fitnesses in job order."""
        ...

    def memory_state(self) -> Mapping[str, object] | None:
        """The shared replay memory for a checkpoint (None without one), including the
        experience of members already trained in an unfinished training phase."""
        ...

    def agents_here(self) -> list[Agent]:
        """The members as agent objects in this process (slot order)."""
        ...

    def close(self) -> None:
        """Stop whatever the backend started (worker processes, actors); idempotent."""
        ...

    def get_state(self, member: int) -> dict[str, object]:
        """A picklable snapshot of ``member`` (weights, optimiser, hyperparameters, ...)."""
        ...

    def set_state(self, member: int, state: Mapping[str, object]) -> None:
        """Replace ``member`` with ``state`` (architecture included)."""
        ...

    def apply_mutation(
        self, operator: MutationOperator, *, pre_training: bool = False, members: Sequence[int] | None = None
    ) -> None:
        """Apply a mutation operator to every member (or only ``members``), in slot order."""
        ...

    def set_hyperparameters(self, member: int, values: Mapping[str, object]) -> None:
        """Give ``member`` these hyperparameter values (learning rates reach its optimizers)."""
        ...

    def steps(self, member: int) -> int:
        """Env steps ``member`` has trained for."""
        ...

    def hyperparameters(self, member: int) -> dict[str, object]:
        """Current (possibly mutated) hyperparameters of ``member``, for logging."""
        ...


class SequentialCalls:
    """The batch calls of :class:`PopulationBackend` as one ``train``/``evaluate`` call after
    another, for backends whose members live in this process (no shared-memory merging)."""

    def train(self, member: int, steps: int, *, seed: int) -> TrainReport:
        raise NotImplementedError

    def evaluate(self, member: int, *, seed: int) -> float:
        raise NotImplementedError

    def train_members(
        self, jobs: Sequence[TrainJob], *, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[int, TrainReport]]:
        for job in jobs:
            if stop is not None and stop():
                return
            yield job.member, (self.train(job.member, job.steps, seed=job.seed) if job.steps
                               else TrainReport(steps=0))

    def end_training_phase(self) -> None:
        return None

    def evaluate_members(self, jobs: Sequence[EvalJob]) -> list[float]:
        return [self.evaluate(job.member, seed=job.seed) for job in jobs]
