"""What a training session tells the run's event log (``RUN_DIR/events.jsonl``).

The session (:mod:`agilerl.training.session`) calls one method per thing that happens; this
module turns it into the event of ``docs/run-events.md`` from what the population backend
and the loop state say. Selection and mutation run in the training process whatever the
backend (members in worker processes or Ray actors are copied and mutated on its orders,
and the mutation operator brings its records back), so this one writer sees all of it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agilerl.hpo.mutation_record import architecture_summary
from agilerl.logging.events import RunEventLog
from agilerl.training.loop import LoopSettings, LoopState

if TYPE_CHECKING:
    from agilerl.core.member_training import Agent
    from agilerl.core.value_types import JsonObject
    from agilerl.population.backend import PopulationBackend

#: ``run_end`` statuses.
FINISHED, TARGET_REACHED, INTERRUPTED, FAILED = (
    "finished", "target_reached", "interrupted", "failed")


def open_run_events(run_dir: Path | None, backend: PopulationBackend, state: LoopState,
                    settings: LoopSettings, *, resumed: bool = False) -> RunEvents:
    """The event log of a session writing into ``run_dir`` (None: no log); a ``resumed``
    session keeps the events up to ``state.generation`` (its checkpoint's) and drops the
    rest."""
    log = RunEventLog(run_dir, keep_until_generation=state.generation if resumed else None)
    return RunEvents(log, backend, state, settings, run_dir)


class RunEvents:
    """Writes a session's events; every method is a no-op without a run folder."""

    def __init__(self, log: RunEventLog, backend: PopulationBackend, state: LoopState,
                 settings: LoopSettings, run_dir: Path | None) -> None:
        self.log = log
        self.backend = backend
        self.state = state
        self.settings = settings
        self.run_dir = run_dir

    def run_start(self, *, algorithm: str, env: str, seed: int | None, resumed: bool,
                  agents: Sequence[Agent]) -> None:
        """The run (or a resumed run's new part) starts with ``agents`` as its members."""
        backend = self.backend
        self.log.emit(
            "run_start", algorithm=algorithm, env=env, pop_size=len(backend),
            max_steps=self.settings.max_steps, evo_steps=self.settings.evo_steps, seed=seed,
            resumed=resumed, generation=self.state.generation,
            members=[{"member": m, "hyperparameters": backend.hyperparameters(m),
                      "architecture": architecture_summary(agents[m])
                      if m < len(agents) else ""}
                     for m in range(len(backend))])

    def generation(self) -> None:
        """A generation was evaluated (the loop state has its fitnesses)."""
        state, backend = self.state, self.backend
        fitnesses = state.fitnesses
        self.log.emit(
            "generation", generation=state.generation + 1, env_steps=state.env_steps or 0,
            members=[{"member": m, "fitness": _finite(fitnesses[m]) if m < len(fitnesses)
                      else None, "steps": backend.steps(m),
                      "hyperparameters": backend.hyperparameters(m)}
                     for m in range(len(backend))])

    def evolution(self, event: str, fields: JsonObject, pre_training: bool) -> None:
        """A selection or one member's mutation (the :class:`LocalEvolution` listener):
        after generation ``G``'s evaluation it belongs to ``G``; the pre-training
        mutation to generation 0."""
        generation = 0 if pre_training else self.state.generation + 1
        self.log.emit(event, generation=generation, **fields)

    def checkpoint(self, folder: Path, steps: int) -> None:
        """A checkpoint folder was written after ``state.generation`` generations."""
        self.log.emit("checkpoint", generation=self.state.generation, env_steps=steps,
                      path=self._relative(folder), elite_member=self.state.elite)

    def run_end(self, status: str, steps: int) -> None:
        """The run stopped (``status``: one of the statuses above)."""
        finite = [f for f in self.state.fitnesses if math.isfinite(f)]
        self.log.emit("run_end", status=status, generations=self.state.generation,
                      env_steps=steps, best_fitness=max(finite) if finite else None,
                      elite_member=self.state.elite)

    def finish(self, error: BaseException | None, steps: int) -> None:
        """Write ``run_end`` for a session that stopped with ``error`` (None: it returned)
        and close the log. A failure here is a warning: the run's own outcome (its result,
        or ``error``) is what the caller must see."""
        try:
            self.run_end(end_status(self.state, error), steps)
        except Exception as exc:
            warnings.warn(f"{self.log.path}: the run_end event could not be written "
                          f"({type(exc).__name__}: {exc})", RuntimeWarning, stacklevel=2)
        finally:
            self.log.close()

    def _relative(self, folder: Path) -> str:
        if self.run_dir is not None:
            try:
                return folder.resolve().relative_to(self.run_dir.resolve()).as_posix()
            except ValueError:
                pass
        return str(folder)


def end_status(state: LoopState, error: BaseException | None) -> str:
    """The ``run_end`` status of a session that stopped with ``error`` (None: returned)."""
    from agilerl.core.errors import TrainingAborted
    from agilerl.training.loop import Interrupted

    if isinstance(error, Interrupted | TrainingAborted | KeyboardInterrupt):
        return INTERRUPTED
    if error is not None:
        return FAILED
    if state.stopped_early:
        return TARGET_REACHED
    # out of wall-clock time: the run stopped short of its budget and can be continued
    return INTERRUPTED if state.out_of_time else FINISHED


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
