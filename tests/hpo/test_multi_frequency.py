"""MF-PBT selection operator: schedule, brackets, migration, NaN handling, seeds, state."""

from __future__ import annotations

import math

import pytest

from agilerl.hpo.multi_frequency import (
    CLONE,
    MIGRATE_FULL,
    MIGRATE_WEIGHTS,
    MultiFrequencySelection,
)


def _op(pop=12, ratios=(1, 3), brackets=(1, 1, 2, 2), seed=0, n_sub=2):
    w, s, o, lo = brackets
    return MultiFrequencySelection(pop, n_subpopulations=n_sub,
                                   evolution_frequency_ratios=list(ratios), n_winners=w,
                                   n_survivors=s, n_open_for_migration=o, n_losers=lo,
                                   rand_seed=seed)


def _moves(plan):
    return {m.slot: m for m in plan.moves}


def test_layout_defaults_and_ids():
    op = MultiFrequencySelection(16, rand_seed=1)
    assert op.evolution_frequency_ratios == [1, 5]
    assert (op.n_winners, op.n_survivors, op.n_open_for_migration, op.n_losers) == (2, 0, 2, 4)
    assert MultiFrequencySelection(8).subpopulation_ids == [0, 0, 0, 0, 1, 1, 1, 1]
    assert MultiFrequencySelection(12, n_subpopulations=3).evolution_frequency_ratios == [1, 5, 10]


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"population_size": 4}, "population_size must be >= 6"),
    ({"population_size": 9, "n_subpopulations": 2}, "divisible by n_subpopulations"),
    ({"population_size": 8, "n_subpopulations": 4}, "must be >= 3"),
    ({"population_size": 8, "n_winners": 2, "n_losers": 2}, "must equal"),
    ({"population_size": 8, "evolution_frequency_ratios": [5, 1]}, "strictly increasing"),
    ({"population_size": 8, "evolution_frequency_ratios": [1, 5, 10]}, "one entry per subpopulation"),
    ({"population_size": 8, "n_subpopulations": 1}, "n_subpopulations must be >= 2"),
])
def test_impossible_layouts_are_refused(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        MultiFrequencySelection(**kwargs)


def test_each_subpopulation_evolves_at_its_own_frequency():
    op = _op(ratios=(1, 3))
    fit = [float(i) for i in range(12)]
    evolved = [op.plan(fit).evolved for _ in range(7)]
    assert evolved == [[0], [0], [0, 1], [0], [0], [0, 1], [0]]
    op = _op(pop=9, ratios=(2, 3, 4), brackets=(1, 0, 1, 1), n_sub=3)
    evolved = [op.plan([1.0] * 9).evolved for _ in range(6)]
    assert evolved == [[], [0], [1], [0, 2], [], [0, 1]]


def test_a_resting_subpopulation_is_untouched():
    op = _op(ratios=(1, 3))
    plan = op.plan([float(i) for i in range(12)])  # only subpopulation 0 evolves
    assert plan.evolved == [0]
    assert all(m.slot < 6 for m in plan.moves)
    assert all(s < 6 for s in plan.mutate)


def test_brackets_winners_copied_over_losers_only():
    op = _op(ratios=(1, 2), brackets=(1, 1, 2, 2))
    # subpopulation 0 ranked: slot 2 (9) > 0 (8) > 4 (7) > 1 (6) > 5 (5) > 3 (4)
    fit = [8.0, 6.0, 9.0, 4.0, 7.0, 5.0] + [0.0] * 6
    plan = op.plan(fit)
    moves = _moves(plan)
    assert plan.elite == 2
    assert 2 not in moves and 0 not in moves  # winner and survivor kept
    assert {5, 3} <= set(moves)  # the two losers
    assert moves[5] == moves[5].__class__(5, 2, CLONE) and moves[3].source == 2
    assert plan.mutate == [3, 5]  # only the winner copies are mutated
    assert all(m.kind != CLONE for s, m in moves.items() if s in (4, 1))  # open: no clone


def test_winner_draws_cover_every_winner_and_follow_the_seed():
    fit = [9.0, 8.0, 1.0, 0.0, 7.0, 6.0, 5.0, 4.0] + [-50.0] * 8  # 2 winners, 4 losers
    parents = set()
    for seed in range(10):
        op = MultiFrequencySelection(16, rand_seed=seed)
        parents |= {m.source for m in op.plan(fit).moves if m.kind == CLONE}
    assert parents == {0, 1}
    a = [MultiFrequencySelection(16, rand_seed=7).plan(fit) for _ in range(2)]
    assert a[0] == a[1]


def test_migration_fills_open_slots_from_better_members_of_other_subpopulations():
    op = _op(ratios=(1, 2), brackets=(1, 1, 2, 2))
    op.plan([0.0] * 12)  # first call: only subpopulation 0 evolves
    # subpopulation 0 (fast) is strong, subpopulation 1 (slow) weak: slots 6..11
    fit = [100.0, 90.0, 80.0, 70.0, 60.0, 50.0, 10.0, 9.0, 8.0, 7.0, 6.0, 75.0]
    plan = op.plan(fit)
    assert plan.evolved == [0, 1]
    moves = _moves(plan)
    # subpopulation 1 ranked: 11 (75) > 6 (10) > 7 (9) > 8 (8) > 9 (7) > 10 (6):
    # open members are 7 and 8; the best outsiders are 0 (100) then 1 (90)
    assert moves[7].source == 0 and moves[8].source == 1
    # from the faster subpopulation: weights only, hyperparameters of subpop 1's best (11)
    assert moves[7].kind == MIGRATE_WEIGHTS and moves[7].hyperparameters_from == 11
    # subpopulation 0 ranked: 0, 1, 2 (80), 3 (70), 4, 5: open 2 and 3; best outsider 11 (75)
    # is worse than 2, so 2 stays; 3 (70) < 75 takes it, whole (slower subpopulation)
    assert 2 not in moves
    assert moves[3] == moves[3].__class__(3, 11, MIGRATE_FULL)
    for move in plan.moves:
        assert move.kind == CLONE or op.subpopulation_of(move.source) != op.subpopulation_of(
            move.slot)
        if move.kind != CLONE:  # migration lands only in open slots
            assert move.slot in (2, 3, 7, 8)
    assert set(plan.mutate) == {4, 5, 9, 10}


def test_nan_never_wins_never_migrates_and_is_replaced():
    op = _op(ratios=(1, 2), brackets=(1, 1, 2, 2))
    nan, inf = math.nan, math.inf
    fit = [nan, inf, 3.0, 2.0, 1.0, 0.5] + [nan] * 6
    plan = op.plan(fit)
    assert plan.elite == 2
    sources = {m.source for m in plan.moves}
    assert sources <= {2, 3, 4, 5}
    moves = _moves(plan)
    assert {0, 1} <= set(moves)  # NaN/inf members are replaced by winner copies
    assert moves[0].source == 2 and moves[0].kind == CLONE
    # all-NaN subpopulation: nothing to clone, but it still receives (whole) migrants
    plan = op.plan([5.0, 4.0, 3.0, 2.0, 1.0, 0.0] + [nan] * 6)  # second call: both evolve
    assert plan.evolved == [0, 1]
    sub1 = [m for m in plan.moves if m.slot >= 6]
    assert sub1 and all(m.kind == MIGRATE_FULL and m.source < 6 for m in sub1)
    assert not any(s >= 6 for s in plan.mutate)
    nothing = MultiFrequencySelection(8).plan([nan] * 8)
    assert nothing.elite is None and nothing.moves == [] and nothing.mutate == []


def test_state_round_trip_continues_exactly():
    fits = [[float((i * 7 + g * 3) % 11) for i in range(12)] for g in range(8)]
    a = _op(ratios=(1, 3), brackets=(2, 0, 2, 2), seed=5)
    for f in fits[:4]:
        a.plan(f)
    b = _op(ratios=(1, 3), brackets=(2, 0, 2, 2), seed=99)
    b.set_state(a.get_state())
    assert b.counters == a.counters
    assert [a.plan(f) for f in fits[4:]] == [b.plan(f) for f in fits[4:]]
    with pytest.raises(ValueError, match="counters"):
        _op(pop=9, ratios=(1, 2, 3), brackets=(1, 0, 1, 1), n_sub=3).set_state(a.get_state())


def test_select_on_agents_matches_the_plan():
    """The agent-list API (the reference's ``select``) applies the same plan."""

    class Agent:
        def __init__(self, index, fitness, lr):
            self.index, self.fitness, self.lr = index, [fitness], lr

        @property
        def hyperparameters(self):
            return {"lr": self.lr}

        def set_hyperparameter(self, name, value):
            setattr(self, name, value)

        def clone(self, index=None):
            new = Agent(self.index if index is None else index, self.fitness[-1], self.lr)
            new.origin = getattr(self, "origin", self.index)
            return new

    fit = [0.0] * 6 + [100.0, 90.0, 80.0, 70.0, 60.0, 50.0]
    population = [Agent(i, f, lr=float(i)) for i, f in enumerate(fit)]
    op, twin = _op(ratios=(1, 2), brackets=(1, 1, 2, 2)), _op(ratios=(1, 2), brackets=(1, 1, 2, 2))
    for o in (op, twin):
        o.counters = [0, 1]
    plan = twin.plan(fit)
    elite, new, to_mutate = op.select(population)
    assert elite.origin == 6 and elite is not population[6]
    assert [a.index for a in new] == list(range(12))
    assert [a.subpopulation_id for a in new] == [0] * 6 + [1] * 6
    for move in plan.moves:
        assert new[move.slot].origin == move.source
    assert to_mutate == plan.mutate
    weights_only = [m for m in plan.moves if m.kind == MIGRATE_WEIGHTS]
    assert weights_only == []  # subpopulation 0 is the fast one: its migrants come whole
    # subpopulation 0 is weak: its open slots 2, 3 receive 6 and 7 whole, with their lr
    assert new[2].origin == 6 and new[2].lr == 6.0
    # the other way round: the slow subpopulation 1 takes the fast one's weights only
    fit = [100.0, 90.0, 80.0, 70.0, 60.0, 50.0] + [0.0] * 6
    population = [Agent(i, f, lr=float(i)) for i, f in enumerate(fit)]
    op = _op(ratios=(1, 2), brackets=(1, 1, 2, 2))
    op.counters = [0, 1]
    _, new, _ = op.select(population)
    assert (new[8].origin, new[8].lr) == (0, 6.0)  # slot 0's networks, slot 6's lr
    assert (new[9].origin, new[9].lr) == (1, 6.0)
