"""What a trainer is given, checked; and the ways building from it fails, explained.

Missing or wrong-kind arguments and unknown algorithm names are :class:`ManifestError`s
naming the argument, as the same mistake in a manifest file would be; failures while
building the environment and the population become the typed errors of
:mod:`agilerl.training.errors`, whose messages say what to do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agilerl.training.errors import (
    EnvironmentSetupError,
    TrainingSetupError,
    UnsupportedAlgorithmError,
    UnsupportedSettingError,
    missing_extra,
)

__all__ = ["algorithm_from_name", "explained", "refuse", "require"]


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
        from agilerl.algorithms.core.spaces import IncompatibleSpaceError

        if isinstance(exc, IncompatibleSpaceError):
            raise UnsupportedSettingError(f"cannot build {what}: {exc}") from exc
        extra = missing_extra(exc, what)
        if extra is not None:
            raise extra from exc
        if not environment:
            raise
        raise EnvironmentSetupError(
            f"cannot build {what}: {type(exc).__name__}: {exc}") from exc


def require(value: Any, name: str, expected: str) -> None:
    """A missing required argument is a :class:`ManifestError` naming it, as in a file."""
    if value is None:
        import agilerl.models as models

        raise models.ManifestError(
            [models.ManifestIssue(path=name, message=f"is required ({expected})",
                                  kind="missing")])


def refuse(name: str, expected: str, value: Any) -> None:
    """An argument of the wrong kind is a :class:`ManifestError` naming it."""
    import agilerl.models as models

    raise models.ManifestError([models.ManifestIssue(
        path=name, message=f"expected {expected}, got {type(value).__name__} {value!r:.60}")])


def algorithm_from_name(name: str) -> Any:
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
