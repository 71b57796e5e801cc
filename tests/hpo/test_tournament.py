"""Tournament selection: elitism, NaN/inf fitness, determinism."""

from __future__ import annotations

import math

import pytest

from agilerl.hpo.tournament import TournamentSelection


class FakeAgent:
    """Stands in for an algorithm: selection only needs ``fitness`` and ``clone``."""

    def __init__(self, name: str, fitness: list[float], index: int = 0):
        self.name, self.fitness, self.index = name, fitness, index

    def clone(self, index: int | None = None) -> FakeAgent:
        return FakeAgent(self.name, list(self.fitness), index if index is not None else self.index)


def _pop(values: list[float]) -> list[FakeAgent]:
    return [FakeAgent(f"a{i}", [v], i) for i, v in enumerate(values)]


def test_elite_is_best_and_kept_in_slot_zero():
    sel = TournamentSelection(2, True, 4, rand_seed=0)
    elite, new = sel.select(_pop([1.0, 5.0, 3.0, 2.0]))
    assert elite.name == "a1"
    assert new[0].name == "a1" and len(new) == 4
    assert [a.index for a in new] == [0, 1, 2, 3]
    assert all(a is not b for a in new for b in _pop([0, 0, 0, 0]))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_fitness_never_selected_or_elite(bad):
    pop = _pop([bad, 1.0, bad, 0.5, bad])
    pop[0].fitness = [100.0, bad]  # mean over eval_loop=2 is non-finite
    sel = TournamentSelection(3, True, 5, eval_loop=2, rand_seed=1)
    for _ in range(20):
        elite, new = sel.select(pop)
        assert elite.name == "a1"
        assert {a.name for a in new} <= {"a1", "a3"}


def test_all_non_finite_skips_selection():
    elite, new = TournamentSelection(2, True, 3, rand_seed=0).select(_pop([math.nan] * 3))
    assert elite is None
    assert [a.name for a in new] == ["a0", "a1", "a2"]


def test_tournament_winner_is_fittest_entrant_and_deterministic():
    pop = _pop([float(i) for i in range(6)])
    runs = []
    for _ in range(2):
        sel = TournamentSelection(6, False, 6, rand_seed=5)
        runs.append([a.name for a in sel.select(pop)[1]])
    assert runs[0] == runs[1] == ["a5"] * 6  # a full-size tournament always includes the best
    sel = TournamentSelection(2, False, 6, rand_seed=5)
    state = sel.get_state()
    first = [a.name for a in sel.select(pop)[1]]
    sel.set_state(state)
    assert [a.name for a in sel.select(pop)[1]] == first
    assert "a0" not in first  # the worst never wins a tournament of two distinct members
