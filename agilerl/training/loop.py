"""The generation loop shared by every single-agent RL paradigm.

One generation:

1. train every member for ``evo_steps`` env steps (``backend.train_members``, possibly in
   parallel; the paradigm, off- or on-policy, lives in the member trainer behind the
   backend, never here), then let the backend merge the members' experience into a shared
   replay memory (``backend.end_training_phase``);
2. evaluate every member (``backend.evaluate_members``: ``eval_steps``, ``eval_loop``);
3. report metrics (logger, progress display);
4. early-stop check (:mod:`agilerl.training.early_stop`);
5. selection + mutation, only when BOTH operators exist (spec §1) and a full generation
   follows (see below);
6. checkpoint check (every ``checkpoint_steps`` steps of the most-trained member:
   ``checkpoint_steps`` counts per agent, as ``max_steps`` and ``evo_steps`` do).

Generations are numbered from 1 wherever a user sees them (progress, ``metrics.csv``'s
``train/generation``, checkpoint names, the summary's count); :attr:`LoopState.generation`
counts the generations completed, so the one in progress is ``generation + 1``.

A remainder shorter than a generation is trained without evolving: when, after a
generation, every member has fewer than ``evo_steps`` steps left before ``max_steps`` (say
``max_steps=10000, evo_steps=5000`` and 16 envs: 4,992 steps a generation leave 16), the
population is not selected and mutated before that short last generation, so members
mutated a moment ago are never judged on a few steps of training.

With a wall-clock budget (``max_wall_seconds``, multi-turn LLM runs) no member starts
training once it is spent (member trainers may also stop between their own steps: the run's
own :class:`~agilerl.core.member_training.Deadline`, given to :func:`run_generations`, is
the one every member trainer's run context holds, so runs sharing a process do not share a
budget); the generation in progress is evaluated, a checkpoint is written when checkpoints
are on, and the run returns without having finished its steps, so a resumed or continued
run goes on to ``max_steps``.

Before the first generation, a population with a mutation operator is mutated once (the
spec's "pre-training mutation", which diversifies the initial population); without selection
it never evolves afterwards. The loop runs while every
member has trained fewer than ``max_steps`` steps; a member's last segment is asked for no
more than the steps it has left (an on-policy member still trains whole rollouts, so it can
end a little past ``max_steps``).

Every train/evaluate call gets a seed derived from (run seed, generation, member, phase), so
a run is a pure function of its seed, and the loop state (:class:`LoopState`) plus the
members' states is all a checkpoint needs to continue exactly, including from the middle of
a generation (an interrupted run stops between two members).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from agilerl.checkpoint.rng import derive_seed
from agilerl.core.member_training import Deadline, TrainReport
from agilerl.population.backend import EvalJob, MemberFailure, PopulationBackend, TrainJob
from agilerl.training.early_stop import EarlyStopping

PHASE_TRAIN = 0
PHASE_EVAL = 1
PHASE_EVOLVE = 2
PHASE_PRE_MUTATION = 3


class EvolutionState(TypedDict):
    """``Evolution.state_dict``: the operators' own states (their RNGs; None: absent)."""

    mutations: Mapping[str, object] | None
    selection: Mapping[str, object] | None


class ReportState(TypedDict):
    """A :class:`TrainReport` in a checkpoint."""

    steps: int
    score: float
    metrics: dict[str, float]
    seconds: float


class LoopStateDict(TypedDict):
    """``LoopState.state_dict``: what a checkpoint keeps of the loop."""

    generation: int
    members_done: int
    reports: list[ReportState]
    checkpoints_written: int
    pre_mutation_done: bool
    fitnesses: list[float]
    finished: bool
    stopped_early: bool
    out_of_time: bool
    elite: int | None
    train_seconds: float
    env_steps: int | None
    early_stop: dict[str, object]


class Evolution(Protocol):
    """Selection and mutation over a backend (operators hold their own seeded RNGs)."""

    def pre_training(self, backend: PopulationBackend) -> None:
        """The one mutation applied before training when there is no selection."""

    def evolve(self, backend: PopulationBackend, fitnesses: list[float]) -> int | None:
        """Select and mutate in place; return the slot now holding the elite, if known."""
        ...

    @property
    def evolves(self) -> bool:
        """True when both selection and mutation exist (evolution every generation)."""
        ...

    @property
    def mutates_before_training(self) -> bool:
        """True when mutation exists without selection."""
        ...

    def state_dict(self) -> EvolutionState: ...

    def load_state_dict(self, state: EvolutionState) -> None: ...


class LoopHooks(Protocol):
    """What the loop tells the outside world, and asks of it."""

    def on_member_trained(self, state: LoopState, member: int, report: TrainReport) -> None: ...

    def on_generation(self, state: LoopState, metrics: dict[str, float]) -> None: ...

    def on_evolved(self, state: LoopState, elite: int | None, fitnesses: list[float]) -> None: ...

    def checkpoint(self, state: LoopState, *, reason: str) -> None: ...

    def interrupt_requested(self) -> bool: ...


class Interrupted(Exception):
    """The run was asked to stop (SIGINT); a checkpoint was written before raising."""


@dataclass
class LoopSettings:
    max_steps: int
    evo_steps: int
    seed: int
    target_score: float | None = None
    checkpoint_steps: int | None = None
    max_wall_seconds: float | None = None
    """Wall-clock budget of a run (None: no limit); the loop reads the run's
    :class:`~agilerl.core.member_training.Deadline` for it, given to :func:`run_generations`."""


@dataclass
class LoopState:
    """Everything the loop itself must remember across a checkpoint."""

    generation: int = 0
    members_done: int = 0
    reports: list[TrainReport] = field(default_factory=list)
    checkpoints_written: int = 0
    pre_mutation_done: bool = False
    fitnesses: list[float] = field(default_factory=list)
    finished: bool = False
    stopped_early: bool = False
    out_of_time: bool = False
    """The last run stopped because its wall-clock budget was spent."""
    elite: int | None = None
    train_seconds: float = 0.0
    env_steps: int | None = None
    """Steps the population has trained (the sum of every member call's steps; offline: one
    gradient update each). Members' own counts are not summed for this: a member copied
    over another by selection brings its count along, steps no member trained again.
    None until a run sets it (a checkpoint written before it existed)."""
    early_stop: EarlyStopping = field(default_factory=lambda: EarlyStopping(None))

    def state_dict(self) -> LoopStateDict:
        return {
            "generation": self.generation,
            "members_done": self.members_done,
            "reports": [ReportState(steps=r.steps, score=r.score, metrics=r.metrics,
                                    seconds=r.seconds) for r in self.reports],
            "checkpoints_written": self.checkpoints_written,
            "pre_mutation_done": self.pre_mutation_done,
            "fitnesses": list(self.fitnesses),
            "finished": self.finished,
            "stopped_early": self.stopped_early,
            "out_of_time": self.out_of_time,
            "elite": self.elite,
            "train_seconds": self.train_seconds,
            "env_steps": self.env_steps,
            "early_stop": self.early_stop.state_dict(),
        }

    def load_state_dict(self, state: LoopStateDict) -> None:
        self.generation = int(state["generation"])
        self.members_done = int(state["members_done"])
        self.reports = [TrainReport(**r) for r in state["reports"]]
        self.checkpoints_written = int(state["checkpoints_written"])
        self.pre_mutation_done = bool(state["pre_mutation_done"])
        self.fitnesses = [float(f) for f in state["fitnesses"]]
        self.finished = bool(state["finished"])
        self.stopped_early = bool(state["stopped_early"])
        self.out_of_time = bool(state.get("out_of_time", False))
        self.elite = state["elite"]
        self.train_seconds = float(state["train_seconds"])
        steps = state.get("env_steps")
        self.env_steps = None if steps is None else int(steps)
        self.early_stop.load_state_dict(state["early_stop"])


def _budget_left(backend: PopulationBackend, max_steps: int) -> bool:
    return all(backend.steps(m) < max_steps for m in range(len(backend)))


def _remainder_next(backend: PopulationBackend, settings: LoopSettings) -> bool:
    """True when the next generation is a remainder: it happens (every member has steps
    left) and no member has a whole ``evo_steps`` left."""
    left = [settings.max_steps - backend.steps(m) for m in range(len(backend))]
    return bool(left) and min(left) > 0 and max(left) < settings.evo_steps


def run_generations(
    backend: PopulationBackend,
    settings: LoopSettings,
    state: LoopState,
    hooks: LoopHooks,
    evolution: Evolution | None = None,
    deadline: Deadline | None = None,
) -> list[float]:
    """Run generations until ``max_steps``, early stop, interruption or ``deadline``;
    return fitnesses.

    ``deadline``: the run's wall-clock budget (``settings.max_wall_seconds``), the same
    :class:`~agilerl.core.member_training.Deadline` the backend's member trainers hold in
    their run context (None: no budget).

    Raises :class:`Interrupted` (after a checkpoint) when ``hooks.interrupt_requested()``
    turns true; the run can then be resumed from that checkpoint.
    """
    state.out_of_time = False
    try:
        return _run(backend, settings, state, hooks, evolution, deadline)
    except MemberFailure as failure:
        if failure.generation is None:
            failure.generation = state.generation
        raise


def _run(
    backend: PopulationBackend,
    settings: LoopSettings,
    state: LoopState,
    hooks: LoopHooks,
    evolution: Evolution | None,
    deadline: Deadline | None,
) -> list[float]:
    state.early_stop.target_score = settings.target_score
    if state.env_steps is None:  # a new run, or one from a checkpoint that did not count
        state.env_steps = sum(backend.steps(m) for m in range(len(backend)))
    if evolution is not None and evolution.mutates_before_training and not state.pre_mutation_done:
        evolution.pre_training(backend)
        state.pre_mutation_done = True
    while not state.finished and (state.members_done or _budget_left(backend, settings.max_steps)):
        _train_members(backend, settings, state, hooks, deadline)
        backend.end_training_phase()
        fitnesses = backend.evaluate_members([
            EvalJob(m, derive_seed(settings.seed, state.generation, m, PHASE_EVAL))
            for m in range(len(backend))
        ])
        state.fitnesses = fitnesses
        state.elite = _best(fitnesses)
        state.early_stop.record(fitnesses)
        hooks.on_generation(state, generation_metrics(backend, state, fitnesses))
        state.stopped_early = state.early_stop.should_stop()
        if (evolution is not None and evolution.evolves and not state.stopped_early
                and not _remainder_next(backend, settings)):
            state.elite = evolution.evolve(backend, fitnesses)
            hooks.on_evolved(state, state.elite, fitnesses)
        state.generation += 1
        state.members_done = 0
        state.reports = []
        state.finished = state.stopped_early or not _budget_left(backend, settings.max_steps)
        _maybe_checkpoint(backend, settings, state, hooks)
        if deadline is not None and deadline.spent() and not state.finished:
            state.out_of_time = True
            if settings.checkpoint_steps:
                hooks.checkpoint(state, reason="max_wall_seconds")
            return list(state.fitnesses)
        if hooks.interrupt_requested() and not state.finished:
            hooks.checkpoint(state, reason="interrupted")
            raise Interrupted
    state.finished = True
    return list(state.fitnesses)


def _train_members(
    backend: PopulationBackend, settings: LoopSettings, state: LoopState, hooks: LoopHooks,
    deadline: Deadline | None,
) -> None:
    """Train the members not yet trained this generation (the backend may run them
    concurrently); an interrupt lets members already started finish, then checkpoints."""
    jobs = [
        TrainJob(member,
                 min(settings.evo_steps, max(settings.max_steps - backend.steps(member), 0)),
                 derive_seed(settings.seed, state.generation, member, PHASE_TRAIN))
        for member in range(state.members_done, len(backend))
    ]
    def stop() -> bool:
        return hooks.interrupt_requested() or (deadline is not None and deadline.spent())

    for member, report in backend.train_members(jobs, stop=stop):
        state.train_seconds += report.seconds
        state.env_steps = (state.env_steps or 0) + report.steps
        state.reports.append(report)
        state.members_done = member + 1
        hooks.on_member_trained(state, member, report)
    if state.members_done < len(backend) and hooks.interrupt_requested():
        hooks.checkpoint(state, reason="interrupted")
        raise Interrupted
    # Out of time: the members not trained keep their steps; the generation is evaluated.


def _maybe_checkpoint(
    backend: PopulationBackend, settings: LoopSettings, state: LoopState, hooks: LoopHooks
) -> None:
    every = settings.checkpoint_steps
    if not every:
        return
    # checkpoint_steps counts steps per agent, as max_steps does, and as the reference
    # counts them: the most-trained member's steps (on-policy members' rollouts end at
    # different counts, and the run ends when one reaches max_steps).
    done = max(backend.steps(m) for m in range(len(backend))) // every
    if done > state.checkpoints_written:
        state.checkpoints_written = done
        hooks.checkpoint(state, reason="scheduled")


def _best(fitnesses: list[float]) -> int | None:
    finite = [(f, i) for i, f in enumerate(fitnesses) if math.isfinite(f)]
    return max(finite, key=lambda pair: (pair[0], -pair[1]))[1] if finite else None


def _mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else math.nan


def generation_metrics(
    backend: PopulationBackend, state: LoopState, fitnesses: list[float]
) -> dict[str, float]:
    """The per-generation metrics dict (names follow the reference's W&B keys)."""
    reports = state.reports
    gen_steps = sum(r.steps for r in reports)
    gen_seconds = sum(r.seconds for r in reports)
    best = state.elite
    metrics: dict[str, float] = {
        "train/generation": state.generation + 1,  # numbered from 1, as everywhere shown
        "train/global_step": state.env_steps or 0,
        "train/steps_per_second": gen_steps / gen_seconds if gen_seconds > 0 else math.nan,
        "eval/mean_fitness": _mean(fitnesses),
        "eval/best_fitness": fitnesses[best] if best is not None else math.nan,
        "train/mean_score": _mean([r.score for r in reports]),
        "eval/target_window_mean": state.early_stop.recent_mean,
    }
    metric_names = sorted({k for r in reports for k in r.metrics})
    for name in metric_names:
        metrics[f"train/mean_{name}"] = _mean([r.metrics.get(name, math.nan) for r in reports])
    for i in range(len(backend)):
        metrics[f"train/agent_{i}/local_steps"] = backend.steps(i)
        metrics[f"eval/agent_{i}/fitness"] = fitnesses[i]
        if i < len(reports):
            metrics[f"train/agent_{i}/score"] = reports[i].score
            for name, value in reports[i].metrics.items():
                metrics[f"train/agent_{i}/{name}"] = value
        for name, hp_value in backend.hyperparameters(i).items():
            if isinstance(hp_value, int | float) and not isinstance(hp_value, bool):
                metrics[f"train/agent_{i}/{name}"] = hp_value
    return metrics
