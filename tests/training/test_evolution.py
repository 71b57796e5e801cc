"""Selection and mutation through the population seam (states and fitnesses)."""

from __future__ import annotations

import math

from agilerl.population import LocalPopulation
from agilerl.training.evolution import LocalEvolution
from agilerl.training.trainer import LocalTrainer


def _trained_population(tiny_dqn):
    trainer = LocalTrainer.from_manifest(manifest=tiny_dqn, seed=4)
    trainer.train(verbose=False)  # gives every member optimizer state
    backend = LocalPopulation(trainer.population, trainer.env, train_member=None)
    return trainer, backend


def test_plan_follows_fitness_and_elitism(tiny_dqn):
    trainer, _ = _trained_population(tiny_dqn)
    evolution = LocalEvolution(trainer.mutations, trainer.selection_strategy)
    elite, parents = evolution.plan([1.0, 5.0, math.nan])
    assert elite == 1 and parents[0] == 1  # elite copied into slot 0
    assert 2 not in parents  # NaN fitness never wins a tournament


def test_copied_slots_share_no_tensors(tiny_dqn):
    trainer, backend = _trained_population(tiny_dqn)
    evolution = LocalEvolution(None, trainer.selection_strategy)
    evolution.mutations = type("NoMutation", (), {"mutation": lambda self, pop, **kw: pop})()
    elite = evolution.evolve(backend, [0.0, 9.0, 0.0])  # member 1 fills most slots
    assert elite == 0
    pointers = []
    for agent in backend.agents:
        for optimizer in agent.optimizers.values():
            for state in optimizer.state.values():
                pointers += [t.data_ptr() for t in state.values() if hasattr(t, "data_ptr")
                             and t.dim() > 0]
        for net in agent.networks.values():
            pointers += [p.data_ptr() for p in net.parameters()]
    assert len(pointers) == len(set(pointers)), "two members share a tensor"
    assert [a.index for a in backend.agents] == [0, 1, 2]


def test_pre_training_mutation_whenever_mutation_is_configured():
    """Spec §5.4: a population with a mutation operator is mutated once before training,
    whether or not it evolves afterwards; selection alone never mutates."""
    operator = object()
    assert LocalEvolution(operator, operator).mutates_before_training
    assert LocalEvolution(operator, None).mutates_before_training
    assert not LocalEvolution(operator, None).evolves
    assert not LocalEvolution(None, operator).mutates_before_training
    assert not LocalEvolution(None, operator).evolves
