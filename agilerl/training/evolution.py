"""Selection and mutation over the population seam.

Selection runs on fitnesses only: the tournament operator is given stand-in members that
carry a fitness and remember which slot they were cloned from, so its draws (from its own
seeded generator) produce a plan "new slot i <- parent slot p". The plan is applied with
``get_state``/``set_state``, which works the same whether members live in this process or
elsewhere. Mutation is then applied by the backend to its members, in slot order, with the
operator's own seeded generator.
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
        return self.mutations is not None and self.selection is None

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
        elite, parents = self.plan(fitnesses)
        # One fresh snapshot per changed slot, all taken before any slot is overwritten:
        # two slots must never share tensors (an optimizer loading a state dict keeps
        # references to its tensors, so shared Adam moments would be updated twice).
        moved = [slot for slot, parent in enumerate(parents)
                 if parent != slot or parents.count(parent) > 1]
        states = {slot: backend.get_state(parents[slot]) for slot in moved}
        for slot in moved:
            state = states[slot]
            state["index"] = slot
            backend.set_state(slot, state)
        backend.apply_mutation(self.mutations, pre_training=False)
        if elite is None:
            return None
        if getattr(self.selection, "elitism", False):
            return 0
        return parents.index(elite) if elite in parents else None

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
