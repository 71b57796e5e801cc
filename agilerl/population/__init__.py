"""The population seam: where members live and how the loops reach them.

The training loops talk to a population only through :class:`PopulationBackend`:
``train(member, steps)``, ``evaluate(member)``, ``get_state(member)`` and
``set_state(member, state)`` (plus a few read-only counters). Selection and mutation are
expressed on fitnesses and member states, so the same loop drives members that live in this
process (:class:`LocalPopulation`) or, later, in Ray actors.
"""

from agilerl.population.backend import MemberTrainer, PopulationBackend, TrainReport
from agilerl.population.local import LocalPopulation

__all__ = ["LocalPopulation", "MemberTrainer", "PopulationBackend", "TrainReport"]
