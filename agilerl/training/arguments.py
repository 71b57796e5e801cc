"""What a trainer is given, checked; and the ways building from it fails, explained.

Missing or wrong-kind arguments and unknown algorithm names are :class:`ManifestError`s
naming the argument, as the same mistake in a manifest file would be; failures while
building the environment and the population become the typed errors of
:mod:`agilerl.core.errors`, whose messages say what to do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator, Mapping
from types import UnionType
from typing import TYPE_CHECKING, NoReturn

from agilerl.core.errors import (
    ArgumentError,
    EnvironmentSetupError,
    TrainingSetupError,
    UnsupportedAlgorithmError,
    UnsupportedSettingError,
    missing_extra,
)

if TYPE_CHECKING:
    from agilerl.models.algo import AlgoSpec

__all__ = ["algorithm_from_name", "check_env_kind", "check_local_arguments", "check_train_arguments",
           "explained", "refuse", "require", "spec_arguments"]


@contextlib.contextmanager
def explained(what: str, *, environment: bool = False) -> Iterator[None]:
    """Turn the known ways building ``what`` can fail into typed errors that say what to do:
    a missing optional package (:class:`MissingExtraError`), a setting not implemented yet
    (:class:`UnsupportedSettingError`) and, for the environment (user code: entrypoints,
    wrappers, configs), any failure (:class:`EnvironmentSetupError`). Other exceptions are
    bugs and pass through."""
    try:
        yield
    except (TrainingSetupError, UnsupportedAlgorithmError):
        raise
    except NotImplementedError as exc:
        raise UnsupportedSettingError(f"cannot build {what}: {exc}") from exc
    except Exception as exc:
        from agilerl.core.spaces import IncompatibleSpaceError

        if isinstance(exc, IncompatibleSpaceError):
            raise UnsupportedSettingError(f"cannot build {what}: {exc}") from exc
        extra = missing_extra(exc, what)
        if extra is not None:
            raise extra from exc
        if not environment:
            raise
        raise EnvironmentSetupError(
            f"cannot build {what}: {type(exc).__name__}: {exc}") from exc


def require(value: object, name: str, expected: str) -> None:
    """A missing required argument is a :class:`ManifestError` naming it, as in a file."""
    if value is None:
        import agilerl.models as models

        raise models.ManifestError(
            [models.ManifestIssue(path=name, message=f"is required ({expected})",
                                  kind="missing")])


def refuse(name: str, expected: str, value: object) -> NoReturn:
    """An argument of the wrong kind is a :class:`ManifestError` naming it."""
    import agilerl.models as models

    raise models.ManifestError([models.ManifestIssue(
        path=name, message=f"expected {expected}, got {type(value).__name__} {value!r:.60}")])


def check_env_kind(algorithm: object, env_spec: object) -> None:
    """A PettingZoo env id given to a single-agent algorithm is a :class:`ManifestError`
    on ``environment.name`` naming the multi-agent algorithms (from Python as from a file)."""
    from agilerl.models import env_checks

    name = getattr(env_spec, "name", None)
    if type(env_spec).__name__ != "GymEnvSpec" or getattr(env_spec, "entrypoint", None) \
            or not isinstance(name, str):
        return
    finding = env_checks.check_single_agent_env(name, getattr(algorithm, "algo_name", "") or
                                                type(algorithm).__name__)
    if finding is not None:
        import agilerl.models as models

        raise models.ManifestError([models.ManifestIssue(path="environment.name",
                                                         message=finding.message)])


def algorithm_from_name(name: str) -> AlgoSpec:
    """The default spec of a registered algorithm; an unknown name is an
    :class:`UnknownAlgorithmError` (a ``ManifestError`` and a ``KeyError``) with a suggestion."""
    import difflib

    import agilerl.models as models

    names = list(models.ALGO_REGISTRY)
    if name in names:
        return models.ALGO_REGISTRY[name]()
    by_case = {n.lower(): n for n in names}
    suggestion = by_case.get(name.lower()) or next(
        iter(difflib.get_close_matches(name, names, n=1)), None)
    raise models.UnknownAlgorithmError([models.ManifestIssue(
        path="algorithm", message=f"unknown algorithm {name!r} (registered: "
        f"{', '.join(names)})", suggestion=suggestion, kind="unknown_algorithm")])


_SPECS = ("training", "mutation", "selection_strategy", "replay_buffer")


def spec_arguments(training: object, mutation: object, selection_strategy: object,
                   replay_buffer: object, validate: Collection[str] = _SPECS
                   ) -> tuple[object, object, object, object]:
    """A trainer's spec arguments: each None, a spec model, or a mapping (validated into its
    local spec when named in ``validate``); anything else is refused naming the argument."""
    from pydantic import BaseModel

    import agilerl.models as models
    from agilerl.models.hpo import SELECTION_SPECS

    given = {"training": training, "mutation": mutation,
             "selection_strategy": selection_strategy, "replay_buffer": replay_buffer}
    for name, value in given.items():
        if value is not None and not isinstance(value, BaseModel | Mapping):
            refuse(name, f"{_SPEC_NAMES[name]}, a mapping of its fields or None", value)
    if isinstance(selection_strategy, Mapping) and "selection_strategy" in validate:
        tag = selection_strategy.get("strategy", "tournament")
        if tag not in SELECTION_SPECS:
            refuse("selection_strategy.strategy", " or ".join(map(repr, SELECTION_SPECS)), tag)
        given["selection_strategy"] = SELECTION_SPECS[tag].model_validate(
            dict(selection_strategy))
    for name, model in (("training", models.TrainingSpec), ("mutation", models.MutationSpec),
                        ("replay_buffer", models.ReplayBufferSpec)):
        value = given[name]
        if isinstance(value, Mapping) and name in validate:
            given[name] = model.model_validate(dict(value))
    return (given["training"], given["mutation"], given["selection_strategy"],
            given["replay_buffer"])


_SPEC_NAMES = {"training": "a TrainingSpec", "mutation": "a MutationSpec",
               "selection_strategy": "a TournamentSelectionSpec or MultiFrequencySelectionSpec",
               "replay_buffer": "a ReplayBufferSpec"}


def check_local_arguments(hpo: object, resume_from_checkpoint: object) -> None:
    """``LocalTrainer``'s own arguments, refused by name when of the wrong type."""
    given = {"hpo": hpo, "resume_from_checkpoint": resume_from_checkpoint}
    _expect(given, "hpo", bool, "True or False", optional=False)
    _expect(given, "resume_from_checkpoint", str | os.PathLike,
            "a path (str or os.PathLike) or None")


def check_train_arguments(arguments: Mapping[str, object]) -> None:
    """Refuse a ``train()`` argument of the wrong type or out of range, naming it
    (:class:`ArgumentError`), before anything is built or written."""
    from agilerl.population.backends import usable_cores

    for name in ("save_elite", "wb", "tensorboard", "checkpoint_replay_buffer"):
        _expect(arguments, name, bool, "True or False", optional=False)
    _expect(arguments, "overwrite_checkpoints", bool, "True, False or None")
    for name in ("elite_path", "tensorboard_log_dir", "checkpoint_path"):
        _expect(arguments, name, str | os.PathLike, "a path (str or os.PathLike) or None")
    if arguments["run_dir"] is not False:
        _expect(arguments, "run_dir", str | os.PathLike,
                "a path (str or os.PathLike), None (a new runs/ folder) or False (none)")
    for name in ("wandb_api_key", "source", "backend", "ray_address"):
        _expect(arguments, name, str, "a string or None")
    _expect(arguments, "wandb_kwargs", Mapping, "a mapping or None")
    verbose = arguments["verbose"]
    if not isinstance(verbose, bool) and verbose not in (0, 1, 2):
        raise ArgumentError(f"verbose={verbose!r:.40}: expected True, False, 0, 1 or 2")
    _whole(arguments, "checkpoint_steps", 0)
    _whole(arguments, "num_workers", 0)
    # More threads than cores only contend; thousands also make a stop signal wait minutes
    # for the thread pool to wind down.
    _whole(arguments, "torch_threads", 1, usable_cores(),
           "the CPU cores this process may use")


def check_no_run_folder(arguments: Mapping[str, object], checkpoint_steps: int | None) -> None:
    """``run_dir=False``: refuse an output that would have to go into the run folder."""
    if arguments["run_dir"] is not False:
        return
    if checkpoint_steps and arguments["checkpoint_path"] is None:
        raise ArgumentError("run_dir=False writes no run folder, so checkpoints need "
                            "checkpoint_path (or drop checkpoint_steps)")
    if arguments["save_elite"] and arguments["elite_path"] is None:
        raise ArgumentError("run_dir=False writes no run folder, so save_elite=True needs "
                            "elite_path")


def _expect(arguments: Mapping[str, object], name: str, kind: type | UnionType, expected: str,
            optional: bool = True) -> None:
    value = arguments[name]
    if (value is None and optional) or (isinstance(value, kind) and (
            kind is bool or not isinstance(value, bool))):
        return
    raise ArgumentError(f"{name}={value!r:.60}: expected {expected}, got "
                        f"{type(value).__name__}")


def _whole(arguments: Mapping[str, object], name: str, low: int, high: int | None = None,
           high_is: str = "") -> None:
    """``arguments[name]``: None, or a whole number from ``low`` to ``high``."""
    value = arguments[name]
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentError(f"{name}={value!r:.60}: expected a whole number or None, got "
                            f"{type(value).__name__}")
    if value < low:
        raise ArgumentError(f"{name}={value}: must be at least {low}")
    if high is not None and value > high:
        raise ArgumentError(f"{name}={value}: must be at most {high}, {high_is}")
