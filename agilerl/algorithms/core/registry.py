"""Registry name (``spec.name``) -> algorithm class.

An implementation registers itself with the :func:`registered` class decorator, under its
``algo`` name. Nothing lists the implementations: the first lookup of a name imports
``agilerl.algorithms.<module>``, the module the generated registry gives the algorithm
(``schemas/algorithms/<name>.schema.json`` -> ``x-agilerl``; ``RainbowDQN`` ->
``rainbow_dqn``), whose decorator registers the class. Adding an algorithm therefore
needs only its file here; its paradigm, network spec and training loop are read from the
generated registry.
"""

from __future__ import annotations

import importlib
import logging
from typing import TypeVar

from agilerl.algorithms.core.member_state import MemberState

logger = logging.getLogger(__name__)

#: Registered name -> implementation (filled by :func:`registered` as modules load): an
#: ``RLAlgorithm`` subclass, or an ``LLMAlgorithm`` one (``agilerl.algorithms.core.llm_base``).
IMPLEMENTATIONS: dict[str, type[MemberState]] = {}

AlgorithmT = TypeVar("AlgorithmT", bound=type[MemberState])


class NotImplementedAlgorithmError(NotImplementedError):
    """A registered algorithm name with no implementation in this version."""


def registered(cls: AlgorithmT) -> AlgorithmT:
    """Class decorator: register ``cls`` as the implementation of ``cls.algo``, with the
    hyperparameter names its schema lists."""
    name = cls.__dict__.get("algo")
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} must set the class attribute 'algo' (its registry name)")
    current = IMPLEMENTATIONS.get(name)
    if current is not None and current is not cls:
        logger.warning("Algorithm %r already has an implementation; replacing %s with %s",
                       name, current.__qualname__, cls.__qualname__)
    _copy_registry_facts(cls, name)
    IMPLEMENTATIONS[name] = cls
    return cls


def _copy_registry_facts(cls: type[MemberState], name: str) -> None:
    """Give ``cls`` the hyperparameter names of its schema (``x-agilerl``), the one place
    they are listed."""
    from agilerl.models._generated import REGISTRY

    entry = REGISTRY.get(name)
    if entry is None:
        raise TypeError(f"{cls.__name__}.algo = {name!r} is not a registered algorithm name")
    cls.hyperparameter_names = entry.hyperparameters
    cls.fixed_hyperparameters = entry.fixed_hyperparameters


def _module(name: str) -> str | None:
    from agilerl.models._generated import REGISTRY

    entry = REGISTRY.get(name)
    return f"agilerl.algorithms.{entry.module}" if entry is not None else None


def load(name: str) -> type[MemberState] | None:
    """The implementation of ``name``, importing its module on first use (None: none)."""
    if name not in IMPLEMENTATIONS:
        module = _module(name)
        if module is not None:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:  # the module exists but one of its imports is missing
                    raise
    return IMPLEMENTATIONS.get(name)


def algorithm_class(name: str) -> type[MemberState]:
    """The class implementing registry name ``name`` (e.g. ``"DQN"``).

    Raises :class:`NotImplementedAlgorithmError` when this version has none.
    """
    cls = load(name)
    if cls is None:
        raise NotImplementedAlgorithmError(
            f"algorithm {name!r} has no implementation yet; implemented: "
            f"{', '.join(implemented())}"
        )
    return cls


def implemented() -> list[str]:
    """Every registry name with an implementation (importing the candidates' modules)."""
    from agilerl.models._generated import REGISTRY

    for name in REGISTRY:
        load(name)
    return sorted(IMPLEMENTATIONS)
