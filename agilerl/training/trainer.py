"""Trainers: build a population from specs or a manifest, and train it.

:class:`Trainer` holds what every trainer shares (spec resolution, the deprecated
``tournament`` keyword, ``from_manifest``, ``to_manifest``); :class:`LocalTrainer` trains on
this machine. ``ArenaTrainer`` (remote training) lives in :mod:`agilerl.arena.trainer` and is
re-exported here lazily, so importing this module does not import the Arena client. This
module imports no torch (the training machinery is imported when a ``LocalTrainer`` is built
or trained): ``ArenaTrainer`` subclasses :class:`Trainer` in the light Arena package.

Differences from the reference library, on purpose:

* ``from_manifest(..., device=, resume_from_checkpoint=, accelerator=)`` honours every
  argument (the reference silently drops them).
* ``train(checkpoint_steps=None, checkpoint_path=None, overwrite_checkpoints=None)``: ``None``
  means "use the manifest's ``training`` value"; the reference overwrites the manifest's
  values with its own defaults, so a manifest's checkpoint settings only worked when passed
  again. Values passed to ``train()`` still win and are stored on ``training_spec``.
* ``training.target_score`` stops a run by the rule in :mod:`agilerl.training.early_stop`
  (the reference also needs 100 generations).
* A ``seed`` makes a run reproducible on CPU, and checkpoints resume exactly.
* Algorithms without an implementation in this version are refused when the trainer is
  built (:class:`UnsupportedAlgorithmError`), never trained with a stand-in.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, SupportsInt, TypeVar

from agilerl.core.algorithm_spec import algo_meta, algo_name
from agilerl.core.errors import TrainingInterrupted, UnsupportedAlgorithmError
from agilerl.training.arguments import (
    algorithm_from_name,
    check_env_kind,
    check_local_arguments,
    check_no_run_folder,
    check_train_arguments,
    explained,
    refuse,
    require,
    spec_arguments,
)

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerBase

    from agilerl.arena.trainer import ArenaTrainer
    from agilerl.core.member_training import Agent, EnvFactory
    from agilerl.core.value_types import JsonObject
    from agilerl.hpo.multi_frequency import MultiFrequencySelection
    from agilerl.hpo.tournament import TournamentSelection
    from agilerl.models.algo import AlgoSpec
    from agilerl.models.hpo import (
        MultiFrequencySelectionSpec,
        MutationSpec,
        TournamentSelectionSpec,
    )
    from agilerl.models.manifest import TrainingManifest
    from agilerl.models.training import ReplayBufferSpec, TrainingSpec
    from agilerl.population.shared_memory import ExperienceDelta, ExperienceDeltaState
    from agilerl.training.llm import LLMRunParts
    from agilerl.training.resume import TrainerState
    from agilerl.training.session import SessionOutcome

__all__ = [
    "ArenaTrainer",
    "LocalTrainer",
    "Trainer",
    "TrainingInterrupted",
    "UnsupportedAlgorithmError",
]

_TOURNAMENT_WARNING = (
    "The 'tournament' argument of {cls} is deprecated; pass 'selection_strategy' instead."
)


TrainerT = TypeVar("TrainerT", bound="Trainer")


def __getattr__(name: str) -> type[ArenaTrainer]:
    if name == "ArenaTrainer":
        from agilerl.arena.trainer import ArenaTrainer

        return ArenaTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _models() -> ModuleType:
    import agilerl.models as models

    return models


def _fold_tournament(cls_name: str, selection: object, kwargs: dict[str, object]) -> object:
    """Fold the deprecated ``tournament=`` kwarg into ``selection_strategy``."""
    if "tournament" in kwargs:
        tournament = kwargs.pop("tournament")
        warnings.warn(_TOURNAMENT_WARNING.format(cls=cls_name), DeprecationWarning, stacklevel=4)
        if tournament is not None:
            if selection is not None and selection != tournament:
                raise ValueError(
                    "conflicting selection strategies: 'tournament' and 'selection_strategy' "
                    "were both given with different values"
                )
            selection = tournament
    if kwargs:
        names = ", ".join(repr(k) for k in sorted(kwargs))
        raise TypeError(f"{cls_name} got unexpected keyword argument(s): {names}.")
    return selection


class Trainer:
    """Shared construction: algorithm/env/training/HPO specs, manifests in and out."""

    #: The manifest file the trainer was built from (``from_manifest`` with a path), if any.
    manifest_source: str | None = None
    _specs_warned: bool = False
    """The manifest's warnings were shown (they are shown once per trainer)."""

    def __init__(
        self,
        algorithm: object,
        environment: object,
        training: object = None,
        mutation: object = None,
        selection_strategy: object = None,
        replay_buffer: object = None,
        **kwargs: object,
    ) -> None:
        selection_strategy = _fold_tournament(type(self).__name__, selection_strategy, kwargs)
        models = _models()
        require(algorithm, "algorithm", "an algorithm spec or a registered name such as 'DQN'")
        require(environment, "environment",
                 "an environment spec, an object with make_env(), or a Gymnasium id")
        if isinstance(algorithm, str):
            algorithm = algorithm_from_name(algorithm)
        elif getattr(algorithm, "algo_name", None) is None \
                and str(getattr(algorithm, "name", "")) not in models.ALGO_REGISTRY:
            # Neither a local spec nor a light (Arena) spec of a registered algorithm.
            refuse("algorithm", "a registered name such as 'DQN' or an algorithm spec "
                    "(DQNSpec(...))", algorithm)
        if not isinstance(environment, str | Mapping) and not hasattr(environment, "make_env") \
                and not hasattr(environment, "name"):
            refuse("environment", "a Gymnasium id, an environment spec or mapping, or an "
                    "object with make_env()", environment)
        # Mappings of the other sections are kept as given: an ArenaTrainer sends them on.
        training, mutation, selection_strategy, replay_buffer = spec_arguments(
            training, mutation, selection_strategy, replay_buffer, validate=("training",))
        self.algorithm_spec = algorithm
        self.training_spec = training if training is not None else models.TrainingSpec()
        self.mutation_spec = mutation
        self.selection_strategy_spec = selection_strategy
        self.replay_buffer_spec = replay_buffer
        self.env_spec = self._resolve_env_spec(environment)

    # ------------------------------------------------------------------ hooks
    def _resolve_env_spec(self, environment: object) -> object:
        raise NotImplementedError(f"{type(self).__name__} must implement _resolve_env_spec")

    def train(self, *args: Any, **kwargs: Any) -> object:
        raise NotImplementedError(f"{type(self).__name__} must implement the train method")

    # ------------------------------------------------------------------ manifests
    @classmethod
    def from_manifest(cls: type[TrainerT],
                      manifest: str | os.PathLike[str] | Mapping[str, object] | TrainingManifest,
                      **kwargs: object) -> TrainerT:
        """Build a trainer from a manifest path, a mapping, or a validated ``TrainingManifest``.

        ``kwargs`` (``device``, ``resume_from_checkpoint``, ``accelerator``, ``seed``, ...)
        are forwarded to the constructor.
        """
        from agilerl.models.manifest import TrainingManifest

        source = os.fspath(manifest) if isinstance(manifest, str | os.PathLike) else None
        validated: TrainingManifest
        if isinstance(manifest, TrainingManifest):
            validated = manifest
        else:
            if isinstance(manifest, os.PathLike):
                manifest = os.fspath(manifest)
            validated = TrainingManifest.get_validated(manifest, mode="python")
        trainer = cls(
            algorithm=validated.algorithm,
            environment=cls._env_spec_from_manifest(validated),
            training=validated.training,
            mutation=validated.mutation,
            selection_strategy=validated.selection_strategy,
            replay_buffer=validated.replay_buffer,
            **kwargs,
        )
        trainer.manifest_source = source
        trainer._specs_warned = True
        return trainer

    @classmethod
    def _env_spec_from_manifest(cls, manifest: TrainingManifest) -> object:
        from agilerl.models.env import resolve_env_spec

        return resolve_env_spec(manifest.algorithm, manifest.environment,
                                base_dir=getattr(manifest, "base_dir", None))

    def to_manifest(self) -> JsonObject:
        """The trainer's specs as a JSON-serialisable manifest mapping."""
        import warnings

        models = _models()
        with warnings.catch_warnings():
            # A manifest's warnings are shown once: when it was read (from_manifest), or
            # for specs given in Python the first time they are serialised here.
            if self._specs_warned:
                warnings.simplefilter("ignore", models.ManifestWarning)
            self._specs_warned = True
            manifest = models.TrainingManifest.from_trainer_specs(
                algorithm=self.algorithm_spec,
                environment=self.env_spec,
                training=self.training_spec,
                mutation=self.mutation_spec,
                replay_buffer=self.replay_buffer_spec,
                selection_strategy=self.selection_strategy_spec,
            )
        return dict(manifest.model_dump(mode="json", exclude_none=True))

    # ------------------------------------------------------------------ deprecated names
    @property
    def tournament_selection_spec(self) -> object:
        """Deprecated: the tournament selection spec (None under MF-PBT)."""
        warnings.warn("tournament_selection_spec is deprecated; use selection_strategy_spec",
                      DeprecationWarning, stacklevel=2)
        spec = self.selection_strategy_spec
        return spec if getattr(spec, "strategy", "tournament") == "tournament" else None


class LocalTrainer(Trainer):
    """Evolutionary population training on this machine.

    Args:
        algorithm: an algorithm spec or a registry name (``"DQN"``).
        environment: an env spec, an object with ``make_env()``, or a Gymnasium id string.
        training: a ``TrainingSpec`` (default: all defaults).
        mutation: a ``MutationSpec`` or None.
        selection_strategy: a ``TournamentSelectionSpec``, a ``MultiFrequencySelectionSpec``
            (MF-PBT: :mod:`agilerl.hpo.multi_frequency`; its bracket sizes are resolved for
            ``training.pop_size``, which must be given) or None. Evolution (selection and
            mutation every generation) needs both; mutation alone mutates once before
            training.
        replay_buffer: a ``ReplayBufferSpec`` (off-policy algorithms; default: the
            schema's ``ReplayBufferSpec`` defaults).
        hpo: add default mutation and tournament specs where none were given.
        resume_from_checkpoint: a checkpoint folder (or a folder of checkpoints: the latest)
            to continue exactly from, or an agent file (``save_checkpoint``/elite) loaded
            into every slot.
        device: torch device; ``"auto"`` picks CUDA when available.
        accelerator: accepted for API compatibility; RL training here does not use it.
        seed: seed for everything (envs, networks, exploration, selection sampling); the
            same seed gives the same run on CPU. Default: a random seed, recorded in
            checkpoints so a resumed run still continues exactly.
        tournament: deprecated alias of ``selection_strategy``.
    """

    algorithm_spec: AlgoSpec
    training_spec: TrainingSpec
    mutation_spec: MutationSpec | None
    selection_strategy_spec: TournamentSelectionSpec | MultiFrequencySelectionSpec | None
    replay_buffer_spec: ReplayBufferSpec | None

    def __init__(
        self,
        algorithm: object,
        environment: object,
        training: object = None,
        mutation: object = None,
        selection_strategy: object = None,
        replay_buffer: object = None,
        *,
        hpo: bool = False,
        resume_from_checkpoint: str | os.PathLike[str] | None = None,
        device: str = "cpu",
        accelerator: object = None,
        seed: int | None = None,
        **kwargs: object,
    ) -> None:
        check_local_arguments(hpo, resume_from_checkpoint)
        training, mutation, selection_strategy, replay_buffer = spec_arguments(
            training, mutation, selection_strategy, replay_buffer)
        super().__init__(algorithm, environment, training, mutation, selection_strategy,
                         replay_buffer, **kwargs)
        from agilerl.population.resident_pages import release_library_pages
        from agilerl.training import build
        from agilerl.training.paradigms import resolve_paradigm

        models = _models()
        self.paradigm = resolve_paradigm(self.algorithm_spec)
        if hpo:
            self.mutation_spec = self.mutation_spec or models.MutationSpec()
            if self.selection_strategy_spec is None:
                self.selection_strategy_spec = models.TournamentSelectionSpec()
        build.check_selection(self.selection_strategy_spec, self.training_spec)
        self.device = build.resolve_device(device)  # before anything is built on it
        # torch is loaded by now: the library pages only its loading touched go back (the
        # run maps back those it uses; see agilerl.population.resident_pages).
        release_library_pages()
        self.accelerator = accelerator
        self.tokenizer: PreTrainedTokenizerBase | None = None  # an LLM run's
        self.seed = build.resolve_seed(seed)
        #: The env the run steps: what the env spec's ``make_env`` (or the paradigm) built,
        #: a vector env, a PettingZoo vector env, a bandit or LLM env, or a user's own
        #: object; each paradigm reads what it needs of it.
        self.env: Any = None
        check_env_kind(self.algorithm_spec, self.env_spec)
        with explained(f"environment {self._env_label()}", environment=True):
            self.env = self._make_env()
        try:
            self._build_rest(resume_from_checkpoint)
        except BaseException:
            self.close()  # no worker processes left behind by a failed construction
            raise

    def _build_rest(self, resume_from_checkpoint: str | os.PathLike[str] | None) -> None:
        from agilerl.training import build
        from agilerl.training.paradigms import paradigm

        self.env_factory = None
        usable_mutations = paradigm(self.paradigm).usable_mutations
        if usable_mutations is not None:
            self.mutation_spec = usable_mutations(self.mutation_spec)
        with explained(f"the {algo_name(self.algorithm_spec)} population for environment "
                        f"{self._env_label()}"):
            self.population = build.make_population(self)
        self.mutations = build.make_mutations(self.mutation_spec, self.algorithm_spec, self.seed)
        self.selection_strategy = build.make_selection(
            self.selection_strategy_spec, len(self.population), self.seed, self.mutation_spec
        )
        self.memory = build.make_memory(self)
        #: Shared-memory deltas of members trained in an unfinished generation (set by a
        #: resume or an interrupted ``train()``; see :mod:`agilerl.population.shared_memory`).
        self.experience_pending: list[ExperienceDelta | ExperienceDeltaState] = []
        self.n_step_memory = None
        from agilerl.training.session import TrainSession

        self.train_fn = TrainSession.run
        self._resume: TrainerState | None = None
        self._continuation: TrainerState | None = None  # where the last train() stopped
        # (see TrainSession)
        #: Where the last ``train()`` call saved the elite, its last checkpoint, its run folder.
        self.last_elite_path: Path | None = None
        self.last_checkpoint: Path | None = None
        self.last_run_dir: Path | None = None
        if resume_from_checkpoint is not None:
            from agilerl.training.resume import load_resume

            resumed = load_resume(self, resume_from_checkpoint)
            self.population = resumed.population
            if resumed.experience_pending is not None:
                self.experience_pending = resumed.experience_pending
            if resumed.seed is not None:
                self.seed = resumed.seed
            self._resume = resumed.state
        build.tag_subpopulations(self.population, self.selection_strategy)

    def close(self) -> None:
        """Close the environment (and stop its worker processes, if any). ``train()``
        rebuilds it when called again."""
        env, self.env = getattr(self, "env", None), None
        if env is not None:
            env.close()

    # ------------------------------------------------------------------ construction
    @property
    def multiturn(self) -> bool:
        """Whether this trainer plays a multi-turn LLM environment (``env_type: multiturn``)."""
        env_type = getattr(self.env_spec, "env_type", None)
        return getattr(env_type, "value", env_type) == "multiturn"

    def _env_label(self) -> str:
        spec = self.env_spec
        return repr(str(getattr(spec, "name", None) or getattr(spec, "entrypoint", None)
                         or type(spec).__name__))

    def _resolve_env_spec(self, environment: object) -> object:
        if isinstance(environment, str | Mapping):
            from agilerl.models.env import resolve_env_spec

            return resolve_env_spec(self.algorithm_spec, environment)
        return environment

    def _make_env(self) -> object:
        from agilerl.training.paradigms import paradigm

        own_env = paradigm(self.paradigm).make_env
        if own_env is None:
            return self.env_builder()()
        parts = own_env(self)
        self.tokenizer = parts.tokenizer
        if parts.max_steps is not None:
            self.training_spec.max_steps = parts.max_steps
        return parts.env

    def env_builder(self) -> EnvFactory:
        """A picklable function that builds this trainer's env (the same spec and seed), for
        members trained in other processes."""
        import functools

        from agilerl.checkpoint.rng import derive_seed
        from agilerl.envs import make_vector_env
        from agilerl.training.paradigms import paradigm

        own_env = paradigm(self.paradigm).make_env
        if own_env is not None:  # built from the trainer itself: this process only
            return functools.partial(_own_env, own_env, self)
        if hasattr(self.env_spec, "make_env") and not _is_gym_spec(self.env_spec):
            return self.env_spec.make_env
        return functools.partial(make_vector_env, self.env_spec,
                                 seed=derive_seed(self.seed, 0xE7))

    @property
    def tournament_selection(self) -> TournamentSelection | MultiFrequencySelection | None:
        """Deprecated: the tournament selection operator (None under MF-PBT)."""
        warnings.warn("tournament_selection is deprecated; use selection_strategy",
                      DeprecationWarning, stacklevel=2)
        from agilerl.training.build import is_multi_frequency

        return None if is_multi_frequency(self.selection_strategy_spec) else \
            self.selection_strategy

    # ------------------------------------------------------------------ training
    def train(
        self,
        verbose: bool | int = True,
        save_elite: bool = False,
        elite_path: str | os.PathLike[str] | None = None,
        wb: bool = False,
        tensorboard: bool = False,
        tensorboard_log_dir: str | os.PathLike[str] | None = None,
        checkpoint_steps: int | None = None,
        checkpoint_path: str | os.PathLike[str] | None = None,
        overwrite_checkpoints: bool | None = None,
        wandb_api_key: str | None = None,
        wandb_kwargs: Mapping[str, object] | None = None,
        *,
        run_dir: str | os.PathLike[str] | bool | None = None,
        checkpoint_replay_buffer: bool = True,
        torch_threads: int | None = 1,
        source: str | None = None,
        num_workers: int | None = None,
        backend: str | None = None,
        ray_address: str | None = None,
    ) -> tuple[list[Agent], list[float]]:
        """Train the population; return ``(population, fitnesses)``.

        ``checkpoint_steps``/``checkpoint_path``/``overwrite_checkpoints`` default to the
        manifest's ``training`` values (None means "use the manifest"); given values win and
        are stored on ``training_spec``. Checkpoints are folders under ``checkpoint_path``
        (default ``RUN_DIR/checkpoints``). ``run_dir``: the run folder for the metrics CSV,
        the resolved manifest, TensorBoard logs and default checkpoint/elite paths, as
        ``agilerl train`` writes it; None (default) or ``"auto"`` creates
        ``runs/{env}-{algo}-{timestamp}``; False writes no run folder (checkpoints and the
        elite then need ``checkpoint_path``/``elite_path``). ``tensorboard_log_dir``
        defaults to ``RUN_DIR/tensorboard``. ``checkpoint_replay_buffer`` saves the
        replay memory in each checkpoint (needed for an exact off-policy resume).
        ``torch_threads``: torch intra-op threads while training on CPU (default 1, fastest
        for these small networks; None leaves torch's setting alone); restored afterwards.
        ``num_workers``, ``backend``, ``ray_address``: where members train, overriding
        ``training.num_workers`` (worker processes on this machine: 0, the default, one
        per usable core where workers can help; 1 this process),
        ``training.backend`` (``"local"`` or ``"ray"``) and ``training.ray_address``. The
        result is the same wherever members train.

        ``verbose``: False (or 0) prints nothing; True (or 1, the default) a live progress
        display, one line per generation and a summary; 2 each generation's per-agent metrics
        table instead of its line (the CLI's ``--verbose`` written out).

        Ctrl-C (SIGINT) or SIGTERM, in the main thread, finishes the member being trained,
        writes a checkpoint and raises :class:`TrainingInterrupted` (a ``KeyboardInterrupt``)
        naming it, the signal and the call that resumes from it; a second signal aborts at
        once.

        Calling ``train()`` again continues from where the previous call stopped: an
        interrupted run finishes its budget; a finished one trains ``max_steps`` more steps
        per member (generations, fitness history and evolution state carry on).
        """
        check_train_arguments({
            "verbose": verbose, "save_elite": save_elite, "elite_path": elite_path, "wb": wb,
            "tensorboard": tensorboard, "tensorboard_log_dir": tensorboard_log_dir,
            "checkpoint_steps": checkpoint_steps, "checkpoint_path": checkpoint_path,
            "overwrite_checkpoints": overwrite_checkpoints, "wandb_api_key": wandb_api_key,
            "wandb_kwargs": wandb_kwargs, "run_dir": run_dir,
            "checkpoint_replay_buffer": checkpoint_replay_buffer,
            "torch_threads": torch_threads, "source": source, "num_workers": num_workers,
            "backend": backend, "ray_address": ray_address})
        training = self.training_spec
        if checkpoint_steps is not None:
            training.checkpoint_steps = checkpoint_steps
        if checkpoint_path is not None:
            training.checkpoint_path = os.fspath(checkpoint_path)
        if overwrite_checkpoints is not None:
            training.overwrite_checkpoints = overwrite_checkpoints
        check_no_run_folder({"run_dir": run_dir, "checkpoint_path": training.checkpoint_path,
                             "save_elite": save_elite, "elite_path": elite_path},
                            training.checkpoint_steps)
        if training.checkpoint_path and not training.checkpoint_steps:
            warnings.warn("checkpoint_path is set without checkpoint_steps: no periodic "
                          "checkpoints will be written", UserWarning, stacklevel=2)
        if elite_path is not None and not save_elite:
            warnings.warn("elite_path is set without save_elite: no elite will be saved",
                          UserWarning, stacklevel=2)
        if getattr(training, "max_wall_seconds", None) is not None and not self.multiturn:
            warnings.warn("training.max_wall_seconds applies to multi-turn LLM training only; "
                          "it is ignored here", UserWarning, stacklevel=2)
        if self.env is None:  # closed after an earlier train(): build it again
            with explained(f"environment {self._env_label()}", environment=True):
                self.env = self._make_env()
        from agilerl.training.session import TrainOptions, TrainSession

        options = TrainOptions(
            verbose=verbose, save_elite=save_elite,
            elite_path=Path(elite_path) if elite_path is not None else None,
            wb=wb, tensorboard=tensorboard,
            tensorboard_log_dir=os.fspath(tensorboard_log_dir) if tensorboard_log_dir else None,
            wandb_api_key=wandb_api_key, wandb_kwargs=dict(wandb_kwargs or {}),
            run_dir=run_dir, checkpoint_replay_buffer=checkpoint_replay_buffer,
            torch_threads=torch_threads, source=source, num_workers=num_workers,
            backend=backend, ray_address=ray_address,
        )
        session = TrainSession(self, options)
        try:
            return session.run()
        finally:
            self._keep(session.outcome)

    def _keep(self, outcome: SessionOutcome) -> None:
        """Store what a ``train()`` call left (as far as it got, when it failed)."""
        if not outcome.loop_started:
            return
        self._continuation = outcome.continuation
        if outcome.population is not None:
            self.population = outcome.population
            self.experience_pending = outcome.experience_pending
            self.last_checkpoint = outcome.last_checkpoint
            self.last_run_dir = outcome.last_run_dir
        if outcome.continuation is not None:
            self._resume = None
        if outcome.elite_settled:
            self.last_elite_path = outcome.last_elite_path

    # ------------------------------------------------------------------ info
    @property
    def evo_steps(self) -> int:
        """Generation length: ``training.evo_steps`` or the algorithm's ``default_evo_steps``
        (from the generated registry)."""
        value = getattr(self.training_spec, "evo_steps", None)
        if value:
            return int(value)
        default = algo_meta(self.algorithm_spec, "default_evo_steps")
        if default is None:
            raise ValueError(f"training.evo_steps is required: algorithm "
                             f"{algo_name(self.algorithm_spec)!r} has no default_evo_steps")
        if not isinstance(default, SupportsInt | str):  # what int() would refuse
            raise TypeError(f"default_evo_steps must be a number, got {default!r}")
        return int(default)

    def manifest_dict(self) -> JsonObject:
        """``to_manifest()`` with a fallback for duck-typed env specs."""
        try:
            return self.to_manifest()
        except Exception:  # a custom env object is not serialisable: keep the rest
            return {"algorithm": {"name": algo_name(self.algorithm_spec)},
                    "training": self.training_spec.model_dump(mode="json", exclude_none=True)}

    def __deepcopy__(self, memo: dict[int, object]) -> LocalTrainer:  # pragma: no cover
        raise TypeError("LocalTrainer holds live environments and cannot be deep-copied")


def _own_env(build: Callable[[LocalTrainer], LLMRunParts], trainer: LocalTrainer) -> object:
    """The env alone of a loop that builds its own (an env factory's result)."""
    return build(trainer).env


def _is_gym_spec(spec: object) -> bool:
    models = _models()
    gym_spec = getattr(models, "GymEnvSpec", None)
    return gym_spec is not None and isinstance(spec, gym_spec)

