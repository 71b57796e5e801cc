"""Training loop name -> how :class:`~agilerl.training.trainer.LocalTrainer` runs it.

An algorithm's loop is the ``training_loop`` of its generated registry entry
(``schemas/algorithms/<name>.schema.json`` -> ``x-agilerl``); :data:`PARADIGMS` is the one
place that maps a loop to its member trainer and says whether it needs a replay memory.
An algorithm trains here when its loop is listed and it has an implementation
(:func:`agilerl.algorithms.algorithm_class`); anything else is refused when the trainer is
built, as are settings its implementation does not honour.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agilerl.training.errors import UnsupportedAlgorithmError, algo_meta, algo_name


@dataclass(frozen=True)
class Paradigm:
    """How one training loop runs: its member trainer, and whether it keeps a replay memory."""

    replay_memory: bool
    member_trainer: Callable[[Any], Any]
    """``trainer -> train(agent, steps, *, seed)`` (the population seam's half)."""
    joint_memory: bool = False
    """The replay memory stores joint multi-agent transitions (``MultiAgentReplayBuffer``)."""


def _off_policy(trainer: Any) -> Any:
    from agilerl.training.off_policy import OffPolicyMemberTrainer

    return OffPolicyMemberTrainer(trainer.env, trainer.memory, trainer.training_spec)


def _on_policy(trainer: Any) -> Any:
    from agilerl.training.on_policy import OnPolicyMemberTrainer

    return OnPolicyMemberTrainer(trainer.env)


def _multi_agent_on_policy(trainer: Any) -> Any:
    from agilerl.training.multi_agent_on_policy import MultiAgentOnPolicyMemberTrainer

    return MultiAgentOnPolicyMemberTrainer(trainer.env)


def _multi_agent_off_policy(trainer: Any) -> Any:
    from agilerl.training.multi_agent_off_policy import MultiAgentOffPolicyMemberTrainer

    return MultiAgentOffPolicyMemberTrainer(trainer.env, trainer.memory, trainer.training_spec)


PARADIGMS: dict[str, Paradigm] = {
    "off_policy": Paradigm(replay_memory=True, member_trainer=_off_policy),
    "on_policy": Paradigm(replay_memory=False, member_trainer=_on_policy),
    "multi_agent_on_policy": Paradigm(replay_memory=False, member_trainer=_multi_agent_on_policy),
    "multi_agent_off_policy": Paradigm(replay_memory=True, member_trainer=_multi_agent_off_policy,
                                       joint_memory=True),
}
"""Registry ``training_loop`` -> paradigm (loops missing here cannot train yet)."""


def trainable() -> list[str]:
    """Registered algorithms this version can train (implemented, with a known loop)."""
    from agilerl.algorithms import implemented
    from agilerl.models import ALGO_REGISTRY

    return [name for name in implemented()
            if name in ALGO_REGISTRY
            and getattr(ALGO_REGISTRY[name], "training_loop", None) in PARADIGMS]


def resolve_paradigm(spec: Any) -> str:
    """The training loop of an algorithm spec; refuses what this version cannot train,
    and settings its implementation would ignore (:class:`UnsupportedAlgorithmError`)."""
    from agilerl.algorithms import NotImplementedAlgorithmError, algorithm_class

    name = algo_name(spec)
    loop = str(algo_meta(spec, "training_loop", "") or "")
    try:
        cls = algorithm_class(name) if loop in PARADIGMS else None
    except NotImplementedAlgorithmError:
        cls = None
    if cls is None:
        raise UnsupportedAlgorithmError(
            f"algorithm {name!r} is not implemented yet in this version of agilerl "
            f"(LocalTrainer trains: {', '.join(trainable())})"
        )
    check_settings(cls, spec)
    return loop


def check_settings(cls: Any, spec: Any) -> None:
    """Refuse (or warn about) algorithm settings ``cls`` does not honour, naming the field."""
    refused, ignored = cls.settings_not_honoured(spec)
    if refused:
        field, why = refused[0]
        raise UnsupportedAlgorithmError(
            f"algorithm.{field} = {getattr(spec, field)!r}: {why}"
            + "".join(f"; also algorithm.{f}: {w}" for f, w in refused[1:])
        )
    for field, why in ignored:
        warnings.warn(f"algorithm.{field} = {getattr(spec, field)!r} has no effect: {why}",
                      UserWarning, stacklevel=4)


def paradigm(name: str) -> Paradigm:
    """The :class:`Paradigm` of a loop name returned by :func:`resolve_paradigm`."""
    return PARADIGMS[name]
