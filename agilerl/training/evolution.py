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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class _Candidate:
    """What the tournament needs of a member: its fitness, and ``clone(index)``."""

    def __init__(self, slot: int, fitness: float) -> None:
        self.slot = slot
        self.fitness = [fitness]

    def clone(self, index: int | None = None) -> _Candidate:
        return _Candidate(self.slot, self.fitness[0])


class LocalEvolution:
    """Binds a mutation operator and a selection operator (either may be None)."""

    def __init__(self, mutations: Any, selection: Any) -> None:
        self.mutations = mutations
        self.selection = selection

    @property
    def evolves(self) -> bool:
        return self.mutations is not None and self.selection is not None

    @property
    def mutates_before_training(self) -> bool:
        return self.mutations is not None

    def pre_training(self, backend: Any) -> None:
        backend.apply_mutation(self.mutations, pre_training=True)

    def plan(self, fitnesses: list[float]) -> tuple[int | None, list[int]]:
        """``(elite slot, parent slot of each new slot)`` drawn by the selection operator."""
        candidates = [
            _Candidate(i, f if math.isfinite(f) else math.nan) for i, f in enumerate(fitnesses)
        ]
        elite, new_population = self.selection.select(candidates)
        return (elite.slot if elite is not None else None), [c.slot for c in new_population]

    def evolve(self, backend: Any, fitnesses: list[float]) -> int | None:
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
        backend.apply_mutation(self.mutations, pre_training=False)
        if elite is None:
            return None
        if getattr(self.selection, "elitism", False):
            return 0
        return parents.index(elite) if elite in parents else None

    def _evolve_multi_frequency(self, backend: Any, fitnesses: list[float]) -> int | None:
        from agilerl.hpo.multi_frequency import MIGRATE_WEIGHTS

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
        if plan.mutate:
            backend.apply_mutation(self.mutations, pre_training=False, members=plan.mutate)
        return plan.elite

    def state_dict(self) -> dict[str, Any]:
        return {
            "mutations": self.mutations.get_state() if self.mutations is not None else None,
            "selection": self.selection.get_state() if self.selection is not None else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self.mutations is not None and state.get("mutations") is not None:
            self.mutations.set_state(state["mutations"])
        if self.selection is not None and state.get("selection") is not None:
            self.selection.set_state(state["selection"])


def _copy_members(backend: Any, sources: Mapping[int, int]) -> None:
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
