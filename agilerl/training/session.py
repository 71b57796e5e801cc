"""One call of ``LocalTrainer.train()``: loggers, progress, checkpoints, Ctrl-C, elite, summary.

The generation loop (:mod:`agilerl.training.loop`) knows nothing of files or terminals; the
session is its :class:`~agilerl.training.loop.LoopHooks`: it logs metrics (CSV in the run
folder, TensorBoard, W&B) and the population's history (``events.jsonl`` in the run folder,
through :mod:`agilerl.training.run_events`), drives the progress display, writes checkpoint
folders, turns the first Ctrl-C (SIGINT) or SIGTERM into "finish the member being trained,
checkpoint, stop", saves the elite and prints the summary.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, cast

from agilerl.checkpoint import capture_rng_state, write_checkpoint
from agilerl.checkpoint.folder import prune_checkpoints, remove_torn_writes
from agilerl.core.algorithm_spec import algo_name
from agilerl.core.errors import TrainingAborted, TrainingInterrupted
from agilerl.core.member_training import Deadline
from agilerl.population import TrainReport
from agilerl.run_folder import CHECKPOINTS_DIR, ELITE_FILE, MANIFEST_FILE, runs_root
from agilerl.training.build import tag_subpopulations
from agilerl.training.early_stop import EarlyStopping
from agilerl.training.loop import Interrupted, LoopSettings, LoopState, run_generations
from agilerl.training.paradigms import MemberTrainerFactory, paradigm
from agilerl.training.run_events import RunEvents, open_run_events

if TYPE_CHECKING:  # pragma: no cover
    from agilerl.core.member_training import Agent
    from agilerl.population.backend import PopulationBackend
    from agilerl.population.shared_memory import ExperienceDelta, ExperienceDeltaState
    from agilerl.training.resume import TrainerState
    from agilerl.training.trainer import LocalTrainer

TENSORBOARD_DIR = "tensorboard"
"""TensorBoard logs go in ``RUN_DIR/tensorboard`` unless a log folder is given."""


#: Signals that stop a run cleanly: Ctrl-C, and the polite stop of job schedulers (the Arena
#: server, systemd, Kubernetes, Slurm) that send SIGTERM and a SIGKILL after a grace period.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


@dataclass
class TrainOptions:
    """``train()`` arguments that are not manifest settings."""

    verbose: bool | int = True
    save_elite: bool = False
    elite_path: Path | None = None
    wb: bool = False
    tensorboard: bool = False
    tensorboard_log_dir: str | None = None
    wandb_api_key: str | None = None
    wandb_kwargs: dict[str, object] = field(default_factory=dict)
    #: None or "auto": a new ``runs/{env}-{algo}-{timestamp}``; False: no run folder.
    run_dir: str | os.PathLike[str] | bool | None = None
    checkpoint_replay_buffer: bool = True
    source: str | None = None
    torch_threads: int | None = 1
    backend: str | None = None
    """``training.backend`` override (``--backend``); None: the manifest's."""
    num_workers: int | None = None
    """``training.num_workers`` override (``--workers``); None: the manifest's."""
    ray_address: str | None = None
    """``training.ray_address`` override (``--ray-address``); None: the manifest's."""


@dataclass
class SessionOutcome:
    """What a ``train()`` call leaves on its trainer, filled in as the session goes;
    ``LocalTrainer.train`` stores it however the call ends."""

    loop_started: bool = False
    """The loop was about to run: the trainer's continuation becomes :attr:`continuation`."""
    population: list[Agent] | None = None
    """The members the backend handed back (None: not handed back)."""
    experience_pending: list[ExperienceDelta | ExperienceDeltaState] = field(
        default_factory=list)
    """The memory deltas of members trained in an interrupted training phase."""
    last_checkpoint: Path | None = None
    last_run_dir: Path | None = None
    continuation: TrainerState | None = None
    """Where the loop stopped, once its state is consistent (None: the call failed); the
    checkpoint the trainer resumed from is then used up."""
    elite_settled: bool = False
    """The call got past saving the elite (when asked to): :attr:`last_elite_path` is its."""
    last_elite_path: Path | None = None


class TrainSession:
    """Runs the loop for a trainer and implements the loop's hooks; what the call leaves
    on the trainer is :attr:`outcome`."""

    def __init__(self, trainer: LocalTrainer, options: TrainOptions) -> None:
        from agilerl.training.evolution import LocalEvolution

        self.trainer = trainer
        self.options = options
        self.outcome = SessionOutcome()
        training = trainer.training_spec
        self.settings = LoopSettings(
            max_steps=int(training.max_steps),
            evo_steps=trainer.evo_steps,
            seed=trainer.seed,
            target_score=training.target_score,
            checkpoint_steps=training.checkpoint_steps,
            max_wall_seconds=getattr(training, "max_wall_seconds", None)
            if trainer.multiturn else None,
        )
        budget = self.settings.max_wall_seconds
        #: The run's deadline: made before the backend, whose member trainers' contexts
        #: carry it, and given to the loop.
        self.deadline = Deadline(budget) if budget is not None else None
        self.state = LoopState(early_stop=EarlyStopping(training.target_score))
        self.evolution = LocalEvolution(trainer.mutations, trainer.selection_strategy)
        self.backend = self._make_backend()
        # no log until the run folder is opened (_open_outputs)
        self._set_events(open_run_events(None, self.backend, self.state, self.settings))
        self.timestamp = time.strftime("%Y%m%d-%H%M%S")
        self._run_dir: Path | None = None
        self._created_run_dir = False
        self.tensorboard_dir: Path | None = None
        self._stop_signal: int | None = None
        self.last_checkpoint: Path | None = None
        self.elite_path: Path | None = None
        self._resumed = trainer._resume is not None or trainer._continuation is not None
        self._resumed_from: TrainerState | None = trainer._resume
        if trainer._resume is not None:
            self._restore(trainer._resume)
        elif trainer._continuation is not None:
            self._continue(trainer._continuation)

    def _make_backend(self) -> PopulationBackend:
        from agilerl.population.backends import BackendSettings, make_backend
        from agilerl.population.setup import PopulationSetup

        trainer, options, training = self.trainer, self.options, self.trainer.training_spec
        setup = PopulationSetup(
            agents=trainer.population, env=trainer.env, env_factory=trainer.env_builder(),
            member_trainer_factory=MemberTrainerFactory(trainer.paradigm),
            training_spec=training, algorithm_spec=trainer.algorithm_spec,
            paradigm=trainer.paradigm, memory=trainer.memory,
            pending_experience=list(trainer.experience_pending), eval_steps=training.eval_steps,
            eval_loop=int(training.eval_loop), seed=trainer.seed,
            torch_threads=options.torch_threads, device=trainer.device,
            deadline=self.deadline,
            worker_processes=paradigm(trainer.paradigm).runs_in_workers,
            extra={"verbose": options.verbose},
        )
        settings = BackendSettings.from_training(
            training, backend=options.backend, num_workers=options.num_workers,
            ray_address=options.ray_address)
        return make_backend(setup, settings)

    # ------------------------------------------------------------------ entry point
    def run(self) -> tuple[list[Agent], list[float]]:
        from agilerl.logging import ProgressDisplay

        trainer, options, outcome = self.trainer, self.options, self.outcome
        try:
            self._open_outputs()
        except BaseException:
            self._discard_new_run_dir()  # a run that never started leaves no folder behind
            raise
        total = self.settings.max_steps * len(self.backend)
        self.progress = ProgressDisplay(total, agents=len(self.backend), verbose=options.verbose,
                                        title=f"{self.algo} {self.env_name}", unit=self.unit)
        self._steps_at_start = self._global_steps()
        started = time.perf_counter()
        interrupted = False
        error: BaseException | None = None
        outcome.loop_started = True  # no continuation until the loop state is consistent
        try:
            self.events.run_start(algorithm=self.algo, env=self.env_name, seed=trainer.seed,
                                  resumed=self._resumed, agents=list(trainer.population))
            with self._stop_on_signals(), self._threads(), self.progress:
                self.progress.update(self._global_steps(), generation=self.state.generation + 1)
                fitnesses = run_generations(self.backend, self.settings, self.state, self,
                                            self.evolution, self.deadline)
        except Interrupted as stop:
            interrupted, error = True, stop
            fitnesses = list(self.state.fitnesses)
        except BaseException as exc:
            error = exc
            raise
        finally:
            population = self.backend.agents_here()
            outcome.experience_pending = self._pending_experience() if interrupted else []
            outcome.population = population
            outcome.last_checkpoint = self.last_checkpoint
            outcome.last_run_dir = self._run_dir
            self.backend.close()
            tag_subpopulations(population, trainer.selection_strategy)
            self.loggers.close()
            self.events.finish(error, self._global_steps())
        outcome.continuation = {"loop": self.state.state_dict(),
                                "evolution": self.evolution.state_dict()}
        if not interrupted and options.save_elite:
            # From the members handed back: the backend (a Ray session) is closed by now.
            self._save_elite(population)
        outcome.last_elite_path, outcome.elite_settled = self.elite_path, True
        self._summary(fitnesses, time.perf_counter() - started, interrupted)
        if interrupted:
            raise TrainingInterrupted(self.last_checkpoint, self._stop_signal or signal.SIGINT,
                                      resume_hint=self._resume_hint())
        return population, fitnesses

    def _open_outputs(self) -> None:
        """Write the resolved manifest and open the loggers (W&B, TensorBoard, CSV)."""
        from agilerl.logging import TensorBoardLogger, make_run_loggers

        options, trainer = self.options, self.trainer
        folder = options.run_dir is not False
        tensorboard_dir = options.tensorboard_log_dir or (
            self.run_dir / TENSORBOARD_DIR if folder else None)
        self.loggers = make_run_loggers(
            algo=self.algo, env_name=self.env_name,
            csv_path=self.run_dir if folder else None,
            csv_append=self._resumed,
            csv_keep_until_step=self._global_steps() if self._resumed else None,
            tensorboard=options.tensorboard, tensorboard_log_dir=tensorboard_dir,
            wb=options.wb, wandb_api_key=options.wandb_api_key,
            wandb_kwargs=options.wandb_kwargs, init_hp=trainer.manifest_dict(),
        )
        self.tensorboard_dir = next((tb.run_dir for tb in self.loggers.loggers
                                     if isinstance(tb, TensorBoardLogger)), None)
        if folder:  # after the loggers, which may refuse (W&B key)
            self._write_manifest()
        self._set_events(open_run_events(self.run_dir if folder else None, self.backend,
                                         self.state, self.settings, resumed=self._resumed))

    def _set_events(self, events: RunEvents) -> None:
        # The evolution tells the event log directly: a listener bound to this session
        # would make a reference cycle that keeps the session, and the trainer with its
        # env worker processes, alive until the garbage collector runs.
        self.events = events
        self.evolution.listener = events.evolution

    def _discard_new_run_dir(self) -> None:
        """Remove the run folder when this session created it (all in it is this session's)."""
        if self._run_dir is not None and self._created_run_dir:
            import shutil

            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None

    def _pending_experience(self) -> list[ExperienceDelta | ExperienceDeltaState]:
        from agilerl.population.shared_memory import PENDING_KEY

        if self.trainer.memory is None:
            return []
        # the backend's memory state, as SharedReplay.state_dict writes it (possibly read
        # back from another process): its pending deltas as dicts
        pending = cast("list[ExperienceDelta | ExperienceDeltaState]",
                       (self.backend.memory_state() or {}).get(PENDING_KEY, []))
        return list(pending)

    def _resume_hint(self) -> str:
        """The Python call that continues this run from its last checkpoint."""
        checkpoint = str(self.last_checkpoint)
        source = getattr(self.trainer, "manifest_source", None) or self.options.source
        if source:
            call = (f"LocalTrainer.from_manifest({str(source)!r}, "
                    f"resume_from_checkpoint={checkpoint!r}).train()")
        else:
            call = f"LocalTrainer(..., resume_from_checkpoint={checkpoint!r}).train()"
        return f"{call} (or call train() again on this trainer)"

    # ------------------------------------------------------------------ names and folders
    @property
    def algo(self) -> str:
        return algo_name(self.trainer.algorithm_spec)

    @property
    def unit(self) -> str:
        """What a step is: an env step, or (offline) one gradient update."""
        return "updates" if self.trainer.paradigm == "offline" else "steps"

    @property
    def env_name(self) -> str:
        return str(getattr(self.trainer.env_spec, "name", None) or "env")

    @property
    def run_dir(self) -> Path:
        """The run folder (created on first use)."""
        if self._run_dir is None:
            chosen = self.options.run_dir
            if isinstance(chosen, bool):  # False: train() refused what needs the folder
                raise AssertionError(f"run_dir={chosen}: no run folder")
            if chosen is None or str(chosen) == "auto":
                path = self._new_auto_run_dir()
                self._created_run_dir = True
            else:
                path = Path(chosen)
                self._created_run_dir = not path.exists()
                path.mkdir(parents=True, exist_ok=True)
            self._run_dir = path
        return self._run_dir

    def _new_auto_run_dir(self) -> Path:
        """A new ``runs/{env}-{algo}-{timestamp}[-N]`` folder; created here with
        ``exist_ok=False`` so that two runs started within one second (in two processes)
        never share one."""
        name = f"{self.env_name}-{self.algo}-{self.timestamp}".replace("/", "_")
        root = runs_root()
        root.mkdir(parents=True, exist_ok=True)
        again = 1
        while True:
            path = root / (name if again == 1 else f"{name}-{again}")
            try:
                path.mkdir()
                return path
            except FileExistsError:
                again += 1

    @property
    def checkpoint_root(self) -> Path:
        configured = self.trainer.training_spec.checkpoint_path
        return Path(configured) if configured else self.run_dir / CHECKPOINTS_DIR

    def _write_manifest(self) -> None:
        import yaml

        manifest = self.trainer.manifest_dict()
        header = (f"# resolved manifest of this run (seed {self.trainer.seed}"
                  + (f", from {self.options.source}" if self.options.source else "") + ")\n")
        resumed = self._resumed_from
        if resumed is not None:
            # Members continue with the algorithm settings saved in the checkpoint (their
            # own, possibly mutated, hyperparameters), so that is what this run uses.
            saved = resumed.get("manifest") or {}
            if isinstance(saved.get("algorithm"), dict):
                manifest["algorithm"] = saved["algorithm"]
            loop = resumed.get("loop")
            generation = loop.get("generation") if loop else None
            header += (f"# resumed from {resumed.get('checkpoint')} (after "
                       f"{generation} generations); algorithm settings as saved "
                       "there\n")
        (self.run_dir / MANIFEST_FILE).write_text(
            header + yaml.safe_dump(manifest, sort_keys=False))

    def _global_steps(self) -> int:
        """Steps the population has trained: what progress, summary, ``metrics.csv``
        (``train/global_step``) and checkpoint names show."""
        if self.state.env_steps is None:
            return sum(self.backend.steps(m) for m in range(len(self.backend)))
        return self.state.env_steps

    # ------------------------------------------------------------------ loop hooks
    def on_member_trained(self, state: LoopState, member: int, report: TrainReport) -> None:
        self.progress.update(self._global_steps(), generation=state.generation + 1)

    def on_generation(self, state: LoopState, metrics: dict[str, float]) -> None:
        self.loggers.log(metrics, step=int(metrics["train/global_step"]))
        self.progress.update(
            self._global_steps(), generation=state.generation + 1,
            best_fitness=_finite(metrics["eval/best_fitness"]),
            mean_fitness=_finite(metrics["eval/mean_fitness"]),
        )
        self.progress.show_generation(metrics)
        self.events.generation()

    def on_evolved(self, state: LoopState, elite: int | None, fitnesses: list[float]) -> None:
        if self.options.save_elite:
            self._save_elite(self.backend.agents_here())

    def interrupt_requested(self) -> bool:
        return self._stop_signal is not None

    def checkpoint(self, state: LoopState, *, reason: str) -> None:
        step = self._global_steps()
        name = checkpoint_name(state, step)
        base, again = name, 1
        while (self.checkpoint_root / name).exists():
            # A resumed run stopped again at the same point: never rewrite the checkpoint it
            # resumed from (a kill mid-write would leave neither).
            again += 1
            name = f"{base}-{again}"
        memory = self.trainer.memory
        keep_buffer = memory is not None and self.options.checkpoint_replay_buffer
        folder = write_checkpoint(
            self.checkpoint_root / name,
            members=[self.backend.get_state(m) for m in range(len(self.backend))],
            trainer_state=dict(self._trainer_state(reason)),
            summary={"global_step": step, "generation": state.generation,
                     "agent_steps": [self.backend.steps(m) for m in range(len(self.backend))],
                     "members_done": state.members_done, "reason": reason,
                     "algorithm": self.algo, "env": self.env_name,
                     "best_fitness": _finite(max(state.fitnesses, default=math.nan)),
                     "elite_member": state.elite},
            replay_buffer=self.backend.memory_state() if keep_buffer else None,
            manifest=self.trainer.manifest_dict(),
        )
        if self.trainer.training_spec.overwrite_checkpoints:
            prune_checkpoints(self.checkpoint_root, keep=folder)
        remove_torn_writes(self.checkpoint_root)  # what a killed earlier write left behind
        self.last_checkpoint = folder
        self.events.checkpoint(folder, step)

    def _trainer_state(self, reason: str) -> TrainerState:
        return {
            "seed": self.trainer.seed,
            "algorithm": self.algo,
            "paradigm": self.trainer.paradigm,
            "loop": self.state.state_dict(),
            "evolution": self.evolution.state_dict(),
            "rng": capture_rng_state(),
            "settings": vars(self.settings).copy(),
            "logger_step": self.state.generation,
            "reason": reason,
        }

    def _restore(self, resume: TrainerState) -> None:
        from agilerl.checkpoint import CheckpointError, restore_rng_state

        try:
            self.state.load_state_dict(resume["loop"])
            self.evolution.load_state_dict(resume["evolution"])
            restore_rng_state(resume["rng"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError,
                RuntimeError) as exc:
            raise CheckpointError(
                f"checkpoint {resume.get('checkpoint')}: trainer.pt holds a loop, evolution or "
                f"RNG state this run cannot continue from ({type(exc).__name__}: {exc})"
            ) from None
        # A resumed run may be given a larger budget: it then continues past its old end.
        self.state.finished = False
        trained = min((self.backend.steps(m) for m in range(len(self.backend))), default=0)
        if not self.state.members_done and trained >= self.settings.max_steps:
            import warnings

            warnings.warn(
                f"checkpoint {resume.get('checkpoint')} already trained every member "
                f"{trained} steps, the whole training.max_steps ({self.settings.max_steps}): "
                "nothing is left to train; raise training.max_steps to continue",
                UserWarning, stacklevel=4)

    def _continue(self, previous: TrainerState) -> None:
        """Pick up where this trainer's previous ``train()`` stopped: finish an interrupted
        run's budget, or give a finished run ``max_steps`` more steps per member."""
        self.state.load_state_dict(previous["loop"])
        self.evolution.load_state_dict(previous["evolution"])
        if self.state.finished:
            most = max((self.backend.steps(m) for m in range(len(self.backend))), default=0)
            self.settings.max_steps = most + int(self.trainer.training_spec.max_steps)
            self.state.finished = False
            self.state.stopped_early = False
            self.state.early_stop = EarlyStopping(self.settings.target_score)

    def _threads(self) -> contextlib.AbstractContextManager[None]:
        """Run with ``torch_threads`` intra-op threads on CPU, restoring the setting after.

        The networks are small: one thread is fastest, and more only contend with env
        stepping (and with each other on a busy machine).
        """
        import torch

        wanted = self.options.torch_threads
        if not wanted or self.trainer.device != "cpu":
            return contextlib.nullcontext()
        previous = torch.get_num_threads()

        @contextlib.contextmanager
        def scope() -> Iterator[None]:
            torch.set_num_threads(int(wanted))
            try:
                yield
            finally:
                torch.set_num_threads(previous)

        return scope()

    # ------------------------------------------------------------------ stop signals
    def _stop_on_signals(self) -> contextlib.AbstractContextManager[None]:
        """While training, SIGINT and SIGTERM ask for a clean stop (see :meth:`_on_signal`).

        Handlers can only be installed from the main thread; elsewhere the signals keep
        their current behaviour. The previous handlers are restored afterwards.
        """

        @contextlib.contextmanager
        def scope() -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = {s: signal.signal(s, self._on_signal) for s in STOP_SIGNALS}
            try:
                yield
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

        return scope()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """First stop signal: finish the member being trained, checkpoint, stop. Second:
        abort now (the last checkpoint stays valid)."""
        if self._stop_signal is not None:
            raise TrainingAborted(signum)
        self._stop_signal = signum
        if signum == signal.SIGINT:
            name, again = "Ctrl-C", "press Ctrl-C again"
        else:
            name = signal.Signals(signum).name
            again = f"send {name} again"
        print(f"\n{name}: finishing the current member, then writing a checkpoint "
              f"({again} to abort without one)", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ results
    def _save_elite(self, agents: Sequence[Agent]) -> None:
        """Save the elite of ``agents`` (the population in member order)."""
        elite = self.state.elite
        if elite is None:
            return
        path = self.options.elite_path or self.run_dir / ELITE_FILE
        if path.is_dir():  # a folder given as the elite path: the elite goes inside it
            path = path / ELITE_FILE
        elif path.suffix != ".pt":
            path = path.with_name(path.name + ".pt")
        agents[elite].save_checkpoint(path)
        self.elite_path = path

    def _summary(self, fitnesses: list[float], seconds: float, interrupted: bool) -> None:
        from agilerl.logging import render_summary

        finite = [f for f in fitnesses if math.isfinite(f)]
        extra = [("budget", self.progress.state.budget),
                 ("generations", str(self.state.generation)), ("seed", str(self.trainer.seed))]
        if self.state.out_of_time:
            extra.append(("stopped", f"training.max_wall_seconds "
                                     f"({self.settings.max_wall_seconds:g} s) spent"))
        if self._run_dir is not None:
            extra.append(("run folder", str(self._run_dir.resolve())))
        if self.tensorboard_dir is not None:
            extra.append(("tensorboard", f"tensorboard --logdir {self.tensorboard_dir} "
                          "(pip install tensorboard)"))
        render_summary(
            self.progress.console, verbose=self.options.verbose,
            best_fitness=max(finite) if finite else None, fitnesses=fitnesses,
            elite_path=self.elite_path,
            checkpoint_path=self.last_checkpoint,
            total_steps=self._global_steps(), wall_time_s=seconds,
            steps_this_run=self._global_steps() - self._steps_at_start, unit=self.unit,
            stopped_early=self.state.stopped_early, interrupted=interrupted, extra=extra,
        )


def checkpoint_name(state: LoopState, steps: int) -> str:
    """``gen{G}-step{S}``: generation ``G`` counted from 1 (the one just ended, or with
    ``-member{k}`` the one in progress after ``k`` members), ``S`` the population's steps,
    as ``train/global_step`` in ``metrics.csv``, the progress line and the summary."""
    if state.members_done:
        return f"gen{state.generation + 1:05d}-step{steps:010d}-member{state.members_done}"
    return f"gen{state.generation:05d}-step{steps:010d}"


def _finite(value: float) -> float | None:
    return value if isinstance(value, int | float) and math.isfinite(value) else None

