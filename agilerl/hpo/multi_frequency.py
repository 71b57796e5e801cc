"""Multiple-Frequencies Population-Based Training (MF-PBT) selection.

After Doulazmi et al., "Multiple-Frequencies Population-Based Training" (2025). The
population of ``N`` members is split into ``M`` subpopulations of ``S = N // M`` members;
population slot ``i`` belongs to subpopulation ``i // S`` for the whole run (a member that
is replaced is replaced in its own slot). Every member still trains ``evo_steps`` per
generation; what differs is how often each subpopulation *evolves*.

The rule, one call of :meth:`MultiFrequencySelection.plan` per generation:

1. **Frequencies.** Subpopulation ``k`` has a counter and a ratio ``delta_k``
   (``evolution_frequency_ratios``, strictly increasing, default ``[1, 5, 10, ...]``). Each
   call adds one to every counter; a subpopulation whose counter reaches ``delta_k``
   evolves in this call and its counter returns to 0. With ratios ``[1, 5]`` subpopulation
   0 evolves at every generation and subpopulation 1 at generations 5, 10, 15, ...
   (counting from 1). The others are left exactly as they are.
2. **Brackets.** An evolving subpopulation is ranked by fitness, best first (ties: lower
   slot first; NaN or infinite fitness ranks last), and cut into ``n_winners`` *winners*,
   ``n_survivors`` *survivors*, ``n_open_for_migration`` *open* members and ``n_losers``
   *losers* (the four sizes sum to ``S``).
3. **Exploitation.** Each loser is replaced by a copy of a winner drawn uniformly at
   random (with replacement) by this operator's generator; these copies, and only these,
   are then mutated. Winners and survivors are kept unchanged. Only members with a finite
   fitness count as winners: a member with NaN/inf fitness ranked into the winners or
   survivors bracket is replaced like a loser, and a subpopulation without any finite
   fitness replaces nobody this way.
4. **Asymmetric migration.** The members of all *other* subpopulations with a finite
   fitness, as they were before this evolution step, are ranked best first; a pointer
   starts on the best. Walking the open members best first, an open member whose fitness
   is finite and at least the pointed candidate's is kept (the pointer stays); otherwise
   the candidate migrates into its slot and the pointer moves on. A candidate from a
   *faster* subpopulation (smaller ratio) brings only its networks (weights, architecture,
   optimizer state) and takes the hyperparameters of the destination's best member, so
   greedy schedules found by fast subpopulations do not spread into slow ones; a
   candidate from a *slower* subpopulation is copied whole. Migrants are not mutated.
   A subpopulation without a finite winner can still receive migrants, copied whole.

Subpopulations are processed in order ``0..M-1``, every decision reading the fitnesses
from before the step and every copy reading the member states from before the step, so
the order does not matter. The elite is the best member of the whole population (None when
no fitness is finite); it is always a winner of its subpopulation, so it keeps its slot.

The operator sees only fitnesses and returns a :class:`MFPlan` ("slot ``i`` <- copy of slot
``p``", kind of copy, slots to mutate); applying it with the population seam's
``get_state``/``set_state`` is the training loop's job
(:mod:`agilerl.training.evolution`). Its randomness comes from its own seeded
``np.random.Generator``; ``get_state``/``set_state`` carry that generator and the counters,
so a run resumed from a checkpoint continues exactly.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from agilerl.core.member_training import Agent

if TYPE_CHECKING:
    from agilerl.models.hpo import MultiFrequencySelectionSpec

#: Kinds of :class:`SlotMove`.
CLONE = "clone"
MIGRATE_FULL = "migrate_full"
MIGRATE_WEIGHTS = "migrate_weights"


@dataclass(frozen=True)
class SlotMove:
    """Slot ``slot`` receives a copy of slot ``source`` (as it was before the step)."""

    slot: int
    source: int
    kind: str
    """``clone`` (a winner over a loser), ``migrate_full`` or ``migrate_weights``."""
    hyperparameters_from: int | None = None
    """``migrate_weights`` only: the slot whose hyperparameters the migrant takes."""


@dataclass
class MFPlan:
    """What one MF-PBT step does to the population."""

    elite: int | None
    moves: list[SlotMove] = field(default_factory=list)
    mutate: list[int] = field(default_factory=list)
    """Slots to mutate after the moves (the winner copies), ascending."""
    evolved: list[int] = field(default_factory=list)
    """Subpopulations that evolved in this step."""


class MFState(TypedDict):
    """The operator's checkpoint: the subpopulation counters and its generator's
    ``bit_generator.state``."""

    counters: list[int]
    rng: Mapping[str, object]


def _finite(value: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


class MultiFrequencySelection:
    """MF-PBT selection (see the module docstring for the rule).

    Args:
        population_size: members in the population (>= 6, a multiple of
            ``n_subpopulations``, at least 3 per subpopulation).
        n_subpopulations: number of subpopulations (>= 2).
        evolution_frequency_ratios: one ratio per subpopulation, strictly increasing,
            each >= 1; None/empty means ``[1, 5, 10, ...]``.
        n_winners, n_survivors, n_open_for_migration, n_losers: bracket sizes; None values
            are resolved as in the manifest (``round(S / 4)``, 0, ``round(S / 4)``, the rest).
        rand_seed: seed of the operator's generator.

    Raises ``ValueError`` (with the manifest's wording) for an impossible layout.
    """

    def __init__(
        self,
        population_size: int,
        n_subpopulations: int = 2,
        evolution_frequency_ratios: Sequence[int] | None = None,
        n_winners: int | None = None,
        n_survivors: int | None = None,
        n_open_for_migration: int | None = None,
        n_losers: int | None = None,
        rand_seed: int | None = None,
    ) -> None:
        from agilerl.models.rules import default_frequency_ratios, frequency_ratio_rules, mf_layout

        if int(n_subpopulations) < 2:
            raise ValueError(f"n_subpopulations must be >= 2, got {n_subpopulations}")
        ratios = list(evolution_frequency_ratios or default_frequency_ratios(n_subpopulations))
        given = SimpleNamespace(
            n_subpopulations=int(n_subpopulations), evolution_frequency_ratios=ratios,
            n_winners=n_winners, n_survivors=n_survivors,
            n_open_for_migration=n_open_for_migration, n_losers=n_losers,
        )
        problems = frequency_ratio_rules(given)
        layout, layout_problems = mf_layout(given, int(population_size), True)
        problems += layout_problems
        if problems:
            raise ValueError(problems[0].message)
        assert layout is not None
        self.population_size = int(population_size)
        self.n_subpopulations = int(n_subpopulations)
        self.subpopulation_size = self.population_size // self.n_subpopulations
        self.evolution_frequency_ratios = [int(r) for r in ratios]
        self.n_winners = layout.n_winners
        self.n_survivors = layout.n_survivors
        self.n_open_for_migration = layout.n_open_for_migration
        self.n_losers = layout.n_losers
        self.counters = [0] * self.n_subpopulations
        self.rng = np.random.default_rng(rand_seed)

    @classmethod
    def from_spec(
        cls, spec: MultiFrequencySelectionSpec, population_size: int,
        rand_seed: int | None = None,
    ) -> MultiFrequencySelection:
        """From a ``MultiFrequencySelectionSpec``."""
        return cls(
            population_size,
            n_subpopulations=spec.n_subpopulations,
            evolution_frequency_ratios=spec.evolution_frequency_ratios,
            n_winners=spec.n_winners,
            n_survivors=spec.n_survivors,
            n_open_for_migration=spec.n_open_for_migration,
            n_losers=spec.n_losers,
            rand_seed=rand_seed,
        )

    # ------------------------------------------------------------------ layout
    def subpopulation_of(self, slot: int) -> int:
        """Subpopulation id of population slot ``slot``."""
        return int(slot) // self.subpopulation_size

    @property
    def subpopulation_ids(self) -> list[int]:
        """Subpopulation id of every slot, in slot order."""
        return [self.subpopulation_of(i) for i in range(self.population_size)]

    def members_of(self, subpopulation: int) -> list[int]:
        """Slots of ``subpopulation``."""
        start = subpopulation * self.subpopulation_size
        return list(range(start, start + self.subpopulation_size))

    def due(self) -> list[int]:
        """Subpopulations that will evolve at the next :meth:`plan` call."""
        return [k for k, (count, ratio) in enumerate(
            zip(self.counters, self.evolution_frequency_ratios, strict=True))
            if count + 1 >= ratio]

    # ------------------------------------------------------------------ selection
    def plan(self, fitnesses: Sequence[float]) -> MFPlan:
        """One MF-PBT step on the members' fitnesses (advances the counters)."""
        if len(fitnesses) != self.population_size:
            raise ValueError(f"got {len(fitnesses)} fitnesses for a population of "
                             f"{self.population_size}")
        scores = [float(f) if _finite(f) else math.nan for f in fitnesses]
        plan = MFPlan(elite=_best(scores, range(self.population_size)))
        evolving = self.due()
        for k in range(self.n_subpopulations):
            self.counters[k] = 0 if k in evolving else self.counters[k] + 1
        for k in evolving:
            plan.evolved.append(k)
            self._evolve_subpopulation(k, scores, plan)
        plan.mutate.sort()
        return plan

    def _evolve_subpopulation(self, k: int, scores: list[float], plan: MFPlan) -> None:
        ranked = _ranked(scores, self.members_of(k))
        n_w, n_s, n_o = self.n_winners, self.n_survivors, self.n_open_for_migration
        kept = ranked[: n_w + n_s]
        open_members = ranked[n_w + n_s : n_w + n_s + n_o]
        winners = [s for s in ranked[:n_w] if _finite(scores[s])]
        replaced = [s for s in kept if not _finite(scores[s])] + ranked[n_w + n_s + n_o :]
        if winners:
            for slot in replaced:
                parent = winners[int(self.rng.integers(len(winners)))]
                plan.moves.append(SlotMove(slot, parent, CLONE))
                plan.mutate.append(slot)
        self._migrate(k, scores, open_members, winners[0] if winners else None, plan)

    def _migrate(self, k: int, scores: list[float], open_members: list[int],
                 elite: int | None, plan: MFPlan) -> None:
        outside = [s for s in range(self.population_size) if self.subpopulation_of(s) != k]
        candidates = [s for s in _ranked(scores, outside) if _finite(scores[s])]
        pointer = 0
        for slot in open_members:
            if pointer >= len(candidates):
                break
            candidate = candidates[pointer]
            if _finite(scores[slot]) and scores[slot] >= scores[candidate]:
                continue
            faster = (self.evolution_frequency_ratios[self.subpopulation_of(candidate)]
                      < self.evolution_frequency_ratios[k])
            if faster and elite is not None:
                plan.moves.append(SlotMove(slot, candidate, MIGRATE_WEIGHTS, elite))
            else:
                plan.moves.append(SlotMove(slot, candidate, MIGRATE_FULL))
            pointer += 1

    def select(
        self, population: Sequence[Agent]
    ) -> tuple[Agent | None, list[Agent], list[int]]:
        """The plan applied to a list of agents in this process (the reference's API).

        A member's fitness is its last ``agent.fitness`` entry. Returns ``(elite,
        new_population, indices_to_mutate)``: a clone of the elite (None when no fitness is
        finite), the population with copies in their new slots (each keeps the slot's
        ``index``) and the ``index`` of every member to mutate, for
        ``Mutations.mutation(new_population, indices=...)``.
        """
        fitnesses = [float(a.fitness[-1]) if len(a.fitness) else math.nan for a in population]
        plan = self.plan(fitnesses)
        new_population = list(population)
        for move in plan.moves:
            copy_ = population[move.source].clone(index=population[move.slot].index)
            if move.hyperparameters_from is not None:
                target = population[move.hyperparameters_from].hyperparameters
                for name, value in target.items():
                    if copy_.hyperparameters.get(name) != value:
                        # only a mutable (numeric) hyperparameter differs between members
                        assert isinstance(value, int | float)
                        copy_.set_hyperparameter(name, value)
            new_population[move.slot] = copy_
        for slot, agent in enumerate(new_population):
            setattr(agent, "subpopulation_id", self.subpopulation_of(slot))  # noqa: B010
        elite = population[plan.elite].clone() if plan.elite is not None else None
        return elite, new_population, [new_population[s].index for s in plan.mutate]

    # ------------------------------------------------------------------ checkpoints
    def get_state(self) -> MFState:
        return {"counters": list(self.counters),
                "rng": copy.deepcopy(self.rng.bit_generator.state)}

    def set_state(self, state: MFState) -> None:
        counters = [int(c) for c in state["counters"]]
        if len(counters) != self.n_subpopulations:
            raise ValueError(f"MF-PBT state has {len(counters)} subpopulation counters; this "
                             f"operator has {self.n_subpopulations} subpopulations")
        self.counters = counters
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])


def _ranked(scores: Sequence[float], slots: Sequence[int]) -> list[int]:
    """``slots`` best first: finite fitness descending, then non-finite; ties by slot."""
    return sorted(slots, key=lambda s: (not _finite(scores[s]),
                                        -scores[s] if _finite(scores[s]) else 0.0, s))


def _best(scores: Sequence[float], slots: Sequence[int] | range) -> int | None:
    ranked = _ranked(scores, list(slots))
    return ranked[0] if ranked and _finite(scores[ranked[0]]) else None
