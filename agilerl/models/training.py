"""Training budget and replay buffer specs (fields from ``schemas/sections/``), with the
training rules a schema cannot state (spec §3.3, X6)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationInfo, model_validator

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import raise_first, skip_rules
from agilerl.models.rules import training_rules

NStepBufferArgs = gen.NStepBufferArgs
PerBufferArgs = gen.PerBufferArgs


@public
class ReplayBufferSpec(gen.ReplayBufferSpec):
    """Replay memory of off-policy algorithms: size, and n-step / prioritised variants."""

    def init_buffer(self, algo_spec: Any, device: Any = "cpu", seed: int | None = None) -> Any:
        """The main replay memory for ``algo_spec``, as the reference builds it.

        Multi-agent algorithms get a plain :class:`~agilerl.components.replay_buffer.ReplayBuffer`
        whatever the flags say. Otherwise ``per_buffer`` (RainbowDQN only, else ``ValueError``)
        gives a ``PrioritizedReplayBuffer`` with ``per_buffer_args.alpha``, even with
        ``n_step_buffer`` on (the n-step memory is then :meth:`init_n_step_buffer`);
        ``n_step_buffer`` alone gives a ``MultiStepReplayBuffer`` with
        ``n_step_buffer_args.n_step`` and the algorithm's ``gamma``; neither, a plain one.
        """
        from agilerl.components.replay_buffer import (
            MultiStepReplayBuffer,
            PrioritizedReplayBuffer,
            ReplayBuffer,
        )

        size = int(self.max_size)
        if _agent_type(algo_spec) == "multi_agent":
            return ReplayBuffer(size, device=device, seed=seed)
        if self.per_buffer:
            if getattr(type(algo_spec), "algo_name", None) != "RainbowDQN":
                raise ValueError("PER buffer is only supported for Rainbow DQN, not "
                                 f"{getattr(type(algo_spec), 'algo_name', type(algo_spec).__name__)}")
            return PrioritizedReplayBuffer(size, alpha=self.per_buffer_args.alpha, device=device,
                                           seed=seed)
        if self.n_step_buffer:
            return MultiStepReplayBuffer(size, n_step=self.n_step_buffer_args.n_step,
                                         gamma=_gamma(algo_spec), device=device, seed=seed)
        return ReplayBuffer(size, device=device, seed=seed)

    def init_n_step_buffer(self, algo_spec: Any, device: Any = "cpu",
                           seed: int | None = None) -> Any:
        """The secondary n-step memory of a combined PER + n-step setup; None unless both
        ``per_buffer`` and ``n_step_buffer`` are on."""
        if not (self.per_buffer and self.n_step_buffer):
            return None
        from agilerl.components.replay_buffer import MultiStepReplayBuffer

        return MultiStepReplayBuffer(int(self.max_size), n_step=self.n_step_buffer_args.n_step,
                                     gamma=_gamma(algo_spec), device=device, seed=seed)


def _agent_type(algo_spec: Any) -> str:
    kind = getattr(algo_spec, "agent_type", "single_agent")
    return str(getattr(kind, "value", kind))


def _gamma(algo_spec: Any) -> float:
    gamma = getattr(algo_spec, "gamma", None)
    if isinstance(gamma, bool) or not isinstance(gamma, int | float):
        raise ValueError("Gamma must be specified for N-step buffer (the algorithm has no "
                         "numeric 'gamma')")
    return float(gamma)


@public
class TrainingSpec(gen.TrainingSpec):
    """How long to train and how the population is evaluated and evolved over time."""

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> TrainingSpec:
        if not skip_rules(info):
            raise_first(training_rules(self))
        return self

    @property
    def pop_size_given(self) -> bool:
        """Whether ``pop_size`` (or ``population_size``) was written explicitly."""
        return "pop_size" in self.model_fields_set


__all__ = ["NStepBufferArgs", "PerBufferArgs", "ReplayBufferSpec", "TrainingSpec"]
