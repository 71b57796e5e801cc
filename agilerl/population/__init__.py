"""The population seam: where members live and how the loops reach them.

The training loops talk to a population only through :class:`PopulationBackend`:
``train_members(jobs)``, ``evaluate_members(jobs)``, ``get_state(member)`` and
``set_state(member, state)`` (plus a few read-only counters). Selection and mutation are
expressed on fitnesses and member states, so the same loop drives members that live in this
process (:class:`LocalPopulation`), in worker processes on this machine
(``training.num_workers``) or in Ray actors (``training.backend: ray``);
:mod:`agilerl.population.backends` picks one.
"""

from agilerl.core.member_training import MemberTrainer, TrainReport
from agilerl.population.backend import EvalJob, PopulationBackend, TrainJob
from agilerl.population.local import LocalPopulation

__all__ = ["EvalJob", "LocalPopulation", "MemberTrainer", "PopulationBackend", "TrainJob",
           "TrainReport"]
