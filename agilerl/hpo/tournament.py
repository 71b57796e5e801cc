"""Tournament selection with elitism over a population of agents."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

import numpy as np

if TYPE_CHECKING:
    from typing import Self  # Python 3.11

    from agilerl.models.hpo import TournamentSelectionSpec


class Selectable(Protocol):
    """What the tournament reads of a member: its fitness history, and ``clone(index)``
    (an agent, or the training loop's stand-in that carries a slot)."""

    fitness: list[float]

    def clone(self, index: int | None = None) -> Self: ...


M = TypeVar("M", bound=Selectable)


class TournamentState(TypedDict):
    """The operator's checkpoint: its generator's ``bit_generator.state``."""

    rng: Mapping[str, object]


class TournamentSelection:
    """Builds the next population from the current one by fitness.

    The fitness of a member is the mean of its last ``eval_loop`` entries in
    ``agent.fitness``. A member whose fitness is NaN or infinite (or who has none) is never
    elite and never wins a tournament. With ``elitism`` the best member is copied unchanged
    into slot 0; every other slot is filled by the winner (highest fitness) of a tournament
    of ``tournament_size`` members drawn without replacement from the eligible ones.
    New members are clones (``agent.clone(index=slot)``) indexed by slot, ``0..N-1``.

    If no member has a finite fitness, nothing is selected: ``select`` returns
    ``(None, clones of the population in order)``.

    Randomness comes from the operator's own ``np.random.Generator`` (``rand_seed``); its
    state is exposed by ``get_state``/``set_state`` for checkpoints.
    """

    def __init__(
        self,
        tournament_size: int,
        elitism: bool,
        population_size: int,
        eval_loop: int = 1,
        rand_seed: int | None = None,
    ):
        if int(tournament_size) < 1:
            raise ValueError(f"tournament_size must be >= 1, got {tournament_size}")
        self.tournament_size = int(tournament_size)
        self.elitism = bool(elitism)
        self.population_size = int(population_size)
        self.eval_loop = max(1, int(eval_loop))
        self.rng = np.random.default_rng(rand_seed)

    @classmethod
    def from_spec(
        cls, spec: TournamentSelectionSpec, population_size: int, eval_loop: int = 1,
        rand_seed: int | None = None,
    ) -> TournamentSelection:
        """From a ``TournamentSelectionSpec``."""
        return cls(spec.tournament_size, spec.elitism, population_size, eval_loop, rand_seed)

    def fitness_of(self, agent: Selectable) -> float:
        """Selection fitness of one member (NaN when it has no finite evaluations)."""
        recent = list(agent.fitness[-self.eval_loop :])
        if not recent:
            return math.nan
        value = float(np.mean(recent))
        return value if math.isfinite(value) else math.nan

    def select(self, population: Sequence[M]) -> tuple[M | None, list[M]]:
        """Return ``(elite, new_population)`` of length ``population_size``."""
        scores = np.array([self.fitness_of(a) for a in population], dtype=np.float64)
        eligible = np.flatnonzero(np.isfinite(scores))
        if eligible.size == 0:
            return None, [a.clone(index=i) for i, a in enumerate(population)]
        best = int(eligible[np.argmax(scores[eligible])])
        elite = population[best]
        new_population: list[M] = []
        if self.elitism:
            new_population.append(elite.clone(index=0))
        size = min(self.tournament_size, eligible.size)
        while len(new_population) < self.population_size:
            entrants = self.rng.choice(eligible, size=size, replace=False)
            winner = int(entrants[np.argmax(scores[entrants])])
            new_population.append(population[winner].clone(index=len(new_population)))
        return elite, new_population

    def get_state(self) -> TournamentState:
        return {"rng": copy.deepcopy(self.rng.bit_generator.state)}

    def set_state(self, state: TournamentState) -> None:
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
