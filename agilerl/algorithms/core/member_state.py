"""The part of a population member's state that every member has, whatever it trains.

RL agents (:class:`~agilerl.algorithms.core.base.RLAlgorithm`) and LLM members
(:class:`~agilerl.algorithms.core.llm_base.LLMAlgorithm`) differ in what their weights are
(whole networks, or a LoRA adapter on a shared base), but both are identified, evolved and
ranked by the same fields: this mixin writes and reads those, and gives both the same
``clone`` and ``load``.
"""

from __future__ import annotations

import copy
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, TypedDict, TypeVar, cast

import torch

from agilerl.algorithms.core.hyperparameters import SpecHyperparameters
from agilerl.core.member_training import Agent
from agilerl.core.value_types import JsonScalar
from agilerl.models._generated.hyperparameter_attributes import AlgoHyperparameterAttributes

#: Version of the state dict written by ``get_state``.
STATE_FORMAT = 1

M = TypeVar("M", bound="MemberState")

#: The fields of ``get_state`` every member has (:meth:`MemberState.member_state`).
MemberStateFields = TypedDict("MemberStateFields", {
    "format": int,
    "algo": str,
    "class": str,
    "index": int,
    "hyperparameters": dict[str, JsonScalar],
    "hp_config": dict[str, dict[str, float]],
    "steps": list[int],
    "scores": list[float],
    "fitness": list[float],
    "mut": str,
})


class MemberState(AlgoHyperparameterAttributes, SpecHyperparameters, Agent, ABC):
    """Identity, hyperparameters and history of a member, in and out of its state dict.

    Subclasses implement ``get_state``/``set_state`` (adding their weights) on top of
    :meth:`member_state` and :meth:`load_member_state`, and ``from_state``.
    """

    algo: ClassVar[str]

    @abstractmethod
    def get_state(self) -> dict[str, object]:
        """Everything needed to rebuild this member exactly; picklable by ``torch.save``."""

    @abstractmethod
    def set_state(self, state: Mapping[str, object]) -> None:
        """Load a state produced by ``get_state``."""

    @classmethod
    @abstractmethod
    def from_state(cls, state: Mapping[str, object], device: str | torch.device | None = None
                   ) -> MemberState:
        """A member rebuilt from ``get_state`` output."""

    def member_state(self) -> MemberStateFields:
        """The fields of ``get_state`` every member has."""
        return {
            "format": STATE_FORMAT,
            "algo": self.algo,
            "class": f"{type(self).__module__}.{type(self).__qualname__}",
            "index": self.index,
            "hyperparameters": self.hyperparameters,
            "hp_config": copy.deepcopy(self.hp_config),
            "steps": list(self.steps),
            "scores": list(self.scores),
            "fitness": list(self.fitness),
            "mut": self.mut,
        }

    def load_member_state(self, state: Mapping[str, object]) -> None:
        """Load the fields :meth:`member_state` wrote (hyperparameters first, since the
        weights and optimizers loaded after them may depend on them)."""
        state = cast(MemberStateFields, state)  # a get_state dict (or its torch.load)
        if state["algo"] != self.algo:
            raise ValueError(f"state is for {state['algo']}, not {self.algo}")
        self.index = int(state["index"])
        for name, value in state["hyperparameters"].items():
            setattr(self, name, value)
        self.hp_config = copy.deepcopy(dict(state["hp_config"]))
        self.steps = list(state["steps"])
        self.scores = list(state["scores"])
        self.fitness = list(state["fitness"])
        self.mut = state["mut"]

    def clone(self: M, index: int | None = None) -> M:
        """An independent copy (weights, optimizer state, counters, RNG state)."""
        new = type(self).from_state(self.get_state(), device=self.device)
        assert isinstance(new, type(self))  # (its own state names its own class)
        if index is not None:
            new.index = int(index)
        return new

    #: Loaded to act, not to train (:meth:`load`): acting methods that sample by default
    #: (PPO, IPPO) then act deterministically unless asked to sample.
    inference: bool = False

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | torch.device = "cpu", *,
             inference: bool = True) -> MemberState:
        """A member saved with ``save_checkpoint``; it can act straight away.

        With ``inference`` (the default) the member is marked as loaded to act
        (:attr:`inference`): ``get_action`` is then greedy for every algorithm (see "Using
        a trained agent" in docs/training.md); ``inference=False`` restores it for
        training code, whose on-policy ``get_action`` samples.

        The file is loaded as plain data only (a crafted or foreign file is refused with a
        :class:`~agilerl.checkpoint.CheckpointError`; nothing in it is run).

        An algorithm's class loads its own algorithm's files only (``DQN.load`` of a PPO
        file is refused with a :class:`~agilerl.checkpoint.CheckpointError` naming both);
        a shared base class (``RLAlgorithm.load``, ``LLMAlgorithm.load``) builds whichever
        algorithm the file holds.
        """
        from agilerl.checkpoint.folder import CheckpointError, load_state_file

        state = load_state_file(Path(path))
        held = state.get("algo") if isinstance(state, Mapping) else None
        wanted = getattr(cls, "algo", None)  # None on the shared base classes
        if wanted is not None and isinstance(held, str) and held != wanted:
            raise CheckpointError(
                f"{path} holds a {held} agent, not a {wanted}: load it with {held}.load, or "
                "with the shared base class's load (RLAlgorithm.load, LLMAlgorithm.load), "
                "which builds whichever algorithm the file holds")
        member = cls.from_state(state, device=device)
        member.inference = bool(inference)
        return member


def cpu_copy(obj: object) -> object:
    """Deep copy of a (nested) state dict with every tensor moved to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [cpu_copy(v) for v in obj]
    return copy.deepcopy(obj)
