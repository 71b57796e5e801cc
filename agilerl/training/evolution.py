"""Selection and mutation over the population seam.

Selection runs on fitnesses only: the tournament operator is given stand-in members that
carry a fitness and remember which slot they were cloned from, so its draws (from its own
seeded generator) produce a plan "new slot i <- parent slot p". The plan is applied with
``get_state``/``set_state``, which works the same whether members live in this process or
elsewhere. Mutation is then applied by the backend to its members, in slot order, with the
operator's own seeded generator.

Multi-frequency selection (MF-PBT, :mod:`agilerl.hpo.multi_frequency`) plans on fitnesses
directly: its plan lists the slots that receive a copy of another slot (winner copies over
losers, migrants into open slots) and the slots to mutate (the winner copies only). It is
applied the same way; a weights-only migrant then gets the destination elite's
hyperparameters through ``set_hyperparameters``.

What each step did is told to ``listener`` (when set; the training session writes it to the
run's ``events.jsonl``): ``("selection", {"members": [{"member", "parent", "elite"}]})``
once per selection, then ``("mutation", {"member", "kind", "changes", "description"})``
per member mutated, in slot order; the pre-training mutation's with ``pre_training`` True.
Telling draws no random numbers, so a run is the same with or without a listener.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from agilerl.training.loop import EvolutionState

if TYPE_CHECKING:
    from agilerl.core.value_types import JsonObject
    from agilerl.hpo.multi_frequency import MFState, MultiFrequencySelection
    from agilerl.hpo.mutation import Mutations, MutationsState
    from agilerl.hpo.tournament import TournamentSelection, TournamentState
    from agilerl.population.backend import PopulationBackend

#: ``listener(event, fields, pre_training)``: see the module docstring.
EvolutionListener = Callable[[str, "JsonObject", bool], None]


class _Candidate:
    """What the tournament needs of a member: its fitness, and ``clone(index)``."""

    def __init__(self, slot: int, fitness: float) -> None:
        self.slot = slot
        self.fitness = [fitness]

    def clone(self, index: int | None = None) -> _Candidate:
        return _Candidate(self.slot, self.fitness[0])


class LocalEvolution:
    """Binds a mutation operator and a selection operator (either may be None)."""

    def __init__(self, mutations: Mutations | None,
                 selection: TournamentSelection | MultiFrequencySelection | None) -> None:
        self.mutations = mutations
        self.selection = selection
        self.listener: EvolutionListener | None = None

    @property
    def evolves(self) -> bool:
        return self.mutations is not None and self.selection is not None

    @property
    def mutates_before_training(self) -> bool:
        return self.mutations is not None

    def pre_training(self, backend: PopulationBackend) -> None:
        self._mutate(backend, None, pre_training=True)

    def _mutate(self, backend: PopulationBackend, members: Sequence[int] | None, *,
                pre_training: bool = False) -> None:
        """Mutate ``members`` (None: all) and tell the listener what changed in each."""
        # only called with a mutation operator (mutates_before_training, evolves)
        assert self.mutations is not None
        take = getattr(self.mutations, "take_records", None)
        if take is not None:
            take()  # records left by a direct call of the operator are not this step's
        if members is None:
            backend.apply_mutation(self.mutations, pre_training=pre_training)
        else:
            backend.apply_mutation(self.mutations, pre_training=pre_training, members=members)
        if self.listener is None or take is None:
            return
        slots = range(len(backend)) if members is None else sorted(set(members))
        # Backends mutate in slot order, one record per member: the n-th record is the
        # n-th slot (a member's own ``index`` is not trusted for this).
        for slot, record in zip(slots, take(), strict=False):
            self.listener("mutation", {"member": slot, **record}, pre_training)

    def _tell_selection(self, parents: Sequence[int], elite: int | None) -> None:
        if self.listener is not None:
            self.listener("selection", {"members": [
                {"member": slot, "parent": int(parent), "elite": slot == elite}
                for slot, parent in enumerate(parents)]}, False)

    def plan(self, fitnesses: list[float]) -> tuple[int | None, list[int]]:
        """``(elite slot, parent slot of each new slot)`` drawn by the selection operator."""
        from agilerl.hpo.multi_frequency import MultiFrequencySelection

        selection = self.selection  # a tournament (MF-PBT plans its own steps)
        assert selection is not None and not isinstance(selection, MultiFrequencySelection)
        candidates = [
            _Candidate(i, f if math.isfinite(f) else math.nan) for i, f in enumerate(fitnesses)
        ]
        elite, new_population = selection.select(candidates)
        return (elite.slot if elite is not None else None), [c.slot for c in new_population]

    def evolve(self, backend: PopulationBackend, fitnesses: list[float]) -> int | None:
        """Select, copy states into their new slots, mutate; return the elite's new slot."""
        from agilerl.hpo.multi_frequency import MultiFrequencySelection

        if isinstance(self.selection, MultiFrequencySelection):
            return self._evolve_multi_frequency(backend, fitnesses)
        elite, parents = self.plan(fitnesses)
        # Every state is read before any slot is overwritten (a parent may itself be
        # replaced in this step); get_state and set_state both copy tensors, so a slot
        # that keeps its own member is left alone and no two slots share memory.
        moved = [slot for slot, parent in enumerate(parents) if parent != slot]
        _copy_members(backend, {slot: parents[slot] for slot in moved})
        if elite is None:
            elite_slot = None
        elif getattr(self.selection, "elitism", False):
            elite_slot = 0
        else:
            elite_slot = parents.index(elite) if elite in parents else None
        self._tell_selection(parents, elite_slot)
        self._mutate(backend, None)
        return elite_slot

    def _evolve_multi_frequency(self, backend: PopulationBackend, fitnesses: list[float]) -> int | None:
        from agilerl.hpo.multi_frequency import MIGRATE_WEIGHTS, MultiFrequencySelection

        assert isinstance(self.selection, MultiFrequencySelection)  # what evolve() checked
        plan = self.selection.plan(fitnesses)
        # Every source is read before any slot is written (a source may itself be replaced
        # in this step).
        hyperparameters = {
            move.slot: backend.hyperparameters(move.hyperparameters_from)
            for move in plan.moves
            if move.kind == MIGRATE_WEIGHTS and move.hyperparameters_from is not None
        }
        _copy_members(backend, {move.slot: move.source for move in plan.moves})
        for slot, values in hyperparameters.items():
            backend.set_hyperparameters(slot, values)
        sources = {move.slot: move.source for move in plan.moves}
        self._tell_selection([sources.get(slot, slot) for slot in range(len(backend))],
                             plan.elite)
        if plan.mutate:
            self._mutate(backend, plan.mutate)
        return plan.elite

    def state_dict(self) -> EvolutionState:
        return {
            "mutations": self.mutations.get_state() if self.mutations is not None else None,
            "selection": self.selection.get_state() if self.selection is not None else None,
        }

    def load_state_dict(self, state: EvolutionState) -> None:
        # the states the operators gave (state_dict), read back from a checkpoint
        mutations, selection = state.get("mutations"), state.get("selection")
        if self.mutations is not None and mutations is not None:
            self.mutations.set_state(cast("MutationsState", mutations))
        if self.selection is not None and selection is not None:
            from agilerl.hpo.multi_frequency import MultiFrequencySelection

            if isinstance(self.selection, MultiFrequencySelection):
                self.selection.set_state(cast("MFState", selection))
            else:
                self.selection.set_state(cast("TournamentState", selection))


def _copy_members(backend: PopulationBackend, sources: Mapping[int, int]) -> None:
    """Slot ``dst`` becomes a copy of slot ``sources[dst]`` (its ``index`` set to ``dst``).

    Every source is read before any slot is written (a source may itself be replaced).
    A backend whose members live elsewhere copies them there (``copy_members``) instead of
    bringing their states here.
    """
    if hasattr(backend, "copy_members"):
        backend.copy_members(dict(sources))
        return
    states = {dst: backend.get_state(src) for dst, src in sources.items()}
    for dst, state in states.items():
        state["index"] = dst
        backend.set_state(dst, state)
