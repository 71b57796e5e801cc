"""The algorithm registry and the base spec classes.

Which algorithms exist and their class-level facts (agent type, off-policy, default
``evo_steps``, network and environment spec classes, ...) come from the generated registry
(``schemas/algorithms/*`` → ``x-agilerl``). This module holds the public base spec classes
(the generated fields, class attributes for those facts, and the rules a schema cannot
state); :func:`agilerl.models.registration.registered` copies the facts onto each
algorithm's class. ``ALGO_REGISTRY`` maps each registered name (exact, case-sensitive) to
its public spec class.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, ClassVar

from pydantic import ValidationInfo, model_validator

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.rules import Violation, algorithm_rules

if TYPE_CHECKING:
    from agilerl.models.env import EnvSpecModel
    from agilerl.models.networks import NetworkSpecModel

logger = logging.getLogger(__name__)


class AgentType(str, Enum):
    """Kind of agent an algorithm trains (decides the environment spec and training loop)."""

    SingleAgent = "single_agent"
    MultiAgent = "multi_agent"
    LLMAgent = "llm_agent"
    OfflineAgent = "offline_agent"
    BanditAgent = "bandit_agent"


def skip_rules(info: ValidationInfo | None) -> bool:
    """True when the caller applies the cross-field rules itself (to report every one with
    its own path) instead of letting the model raise the first."""
    context = info.context if info is not None else None
    return bool(context and context.get("collect_rules"))


def raise_first(violations: list[Violation]) -> None:
    """Raise the first broken rule as a ``ValueError`` (Pydantic reports it)."""
    if violations:
        raise ValueError(violations[0].message)


@public
class AlgoSpec(gen.AlgoSpec):
    """Base of every algorithm spec. Class attributes describe the algorithm (from the
    registry); instance fields are its hyperparameters."""

    agent_type: ClassVar[AgentType] = AgentType.SingleAgent
    off_policy: ClassVar[bool] = False
    offline: ClassVar[bool] = False
    bandit: ClassVar[bool] = False
    default_evo_steps: ClassVar[int | None] = None
    network_spec: ClassVar[type[NetworkSpecModel] | None] = None
    """Network spec class the ``network`` section is validated with (eager path)."""
    env_spec: ClassVar[type[EnvSpecModel] | None] = None
    """Environment spec class the ``environment`` section is parsed into."""
    env_kind: ClassVar[str] = "gym"
    env_type: ClassVar[str | None] = None
    """LLM environment type injected when the manifest omits it."""
    training_loop: ClassVar[str] = ""
    arena: ClassVar[bool] = False
    replay_features: ClassVar[frozenset[str]] = frozenset()
    """What of a replay memory the algorithm learns from (``per``, ``n_step``)."""
    algo_name: ClassVar[str] = ""
    """Registered name (``DQN``)."""

    @property
    def display_name(self) -> str:
        """Name used in run and checkpoint names (``Recurrent PPO`` for a recurrent PPO).
        Serialisation always writes the registered name."""
        if getattr(self, "recurrent", False):
            return f"Recurrent {self.algo_name}"
        return self.algo_name

    @model_validator(mode="after")
    def _check_rules(self, info: ValidationInfo) -> AlgoSpec:
        if not skip_rules(info):
            raise_first(algorithm_rules(self.algo_name, self))
        return self


AlgorithmSpec = AlgoSpec
"""The base spec class under the reference library's name for it."""


@public
class RLAlgorithmSpec(gen.RLAlgorithmSpec, AlgoSpec):
    """Base of single-agent RL algorithm specs (including offline and bandit ones)."""


@public
class MultiAgentRLAlgorithmSpec(gen.MultiAgentRLAlgorithmSpec, AlgoSpec):
    """Base of multi-agent RL algorithm specs."""

    agent_type: ClassVar[AgentType] = AgentType.MultiAgent


@public
class LLMAlgorithmSpec(gen.LLMAlgorithmSpec, AlgoSpec):
    """Base of LLM fine-tuning algorithm specs."""

    agent_type: ClassVar[AgentType] = AgentType.LLMAgent


@public
class NeuralBanditSpec(gen.NeuralBanditSpec, RLAlgorithmSpec):
    """Base of the neural contextual-bandit specs (NeuralTS, NeuralUCB)."""


def spec_module(name: str) -> str:
    """Module of a registered algorithm's public spec (``RainbowDQN`` → ``...rainbow_dqn``)."""
    return "agilerl.models.algorithms." + gen.REGISTRY[name].module


@dataclass(frozen=True)
class RegistryEntry:
    """What :meth:`AlgorithmRegistry.get` returns: the reference library's entry type."""

    spec_cls: type[AlgoSpec]


class AlgorithmRegistry(MutableMapping[str, type[AlgoSpec]]):
    """Registered name (exact, case-sensitive) → spec class.

    Every algorithm of the generated registry is listed from the start; its public class is
    created on first lookup, so validating one manifest builds only the classes it uses.
    """

    def __init__(self) -> None:
        self._classes: dict[str, type[AlgoSpec]] = {}
        self._names: list[str] = list(gen.REGISTRY)

    def __getitem__(self, name: str) -> type[AlgoSpec]:
        if name not in self._classes and name in gen.REGISTRY:
            importlib.import_module(spec_module(name))
        return self._classes[name]

    def __setitem__(self, name: str, spec_class: type[AlgoSpec]) -> None:
        self._classes[name] = spec_class
        if name not in self._names:
            self._names.append(name)

    def __delitem__(self, name: str) -> None:
        self._classes.pop(name, None)
        self._names.remove(name)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"AlgorithmRegistry({sorted(self._names)})"

    # The reference library's registry is not a mapping: ``get`` returns an entry (or raises
    # ``KeyError`` naming the registered algorithms) and ``add`` registers. Code written
    # against it keeps working; ``registry[name]`` gives the spec class directly.
    def get(self, name: str) -> RegistryEntry:  # type: ignore[override]
        """The entry of ``name`` (its ``spec_cls``); ``KeyError`` listing the registered names."""
        if name not in self:
            raise KeyError(f"No registry entry for algorithm {name!r}. Registered: "
                           f"{', '.join(sorted(self._names))}")
        return RegistryEntry(spec_cls=self[name])

    def add(self, name: str, spec_cls: type[AlgoSpec]) -> None:
        """Register ``spec_cls`` under ``name``; registering a name again logs a warning."""
        if self._classes.get(name) is spec_cls:
            logger.warning("Algorithm %r is already registered as %s", name, spec_cls.__name__)
        register_algorithm(name, spec_cls)


ALGO_REGISTRY = AlgorithmRegistry()
"""Registered name (exact, case-sensitive) → spec class."""

def register_algorithm(name: str, spec_class: type[AlgoSpec]) -> None:
    """Add (or replace, with a warning) a registry entry."""
    current = ALGO_REGISTRY._classes.get(name)
    if current is not None and current is not spec_class:
        logger.warning("Algorithm %r is already registered; replacing %s with %s", name,
                       current.__name__, spec_class.__name__)
    ALGO_REGISTRY[name] = spec_class


def generated_entry(name: str) -> gen.AlgorithmEntry:
    """The generated registry entry of a registered algorithm."""
    return gen.REGISTRY[name]
