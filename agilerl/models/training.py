"""Training budget and replay buffer specs (fields from ``schemas/sections/``), with the
training rules a schema cannot state (spec §3.3, X6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationInfo, model_validator

from agilerl.models import _generated as gen
from agilerl.models._facade import public
from agilerl.models.algo import raise_first, skip_rules
from agilerl.models.rules import prioritized_replay_refusal, training_rules

if TYPE_CHECKING:
    import torch

    from agilerl.components.replay_buffer import ReplayBuffer
    from agilerl.models.algo import AlgoSpec

NStepBufferArgs = gen.NStepBufferArgs
PerBufferArgs = gen.PerBufferArgs


@public
class ReplayBufferSpec(gen.ReplayBufferSpec):
    """Replay memory of off-policy algorithms: size, and n-step / prioritised variants."""

    def init_buffer(self, algo_spec: AlgoSpec, device: str | torch.device = "cpu",
                    seed: int | None = None) -> ReplayBuffer:
        """The replay memory ``LocalTrainer`` builds for ``algo_spec``.

        Multi-agent algorithms get a plain :class:`~agilerl.components.replay_buffer.ReplayBuffer`
        whatever the flags say. Otherwise ``per_buffer`` (only for an algorithm that learns
        from priorities, else ``ValueError``) gives a ``PrioritizedReplayBuffer`` with
        ``per_buffer_args.alpha``, of n-step transitions when ``n_step_buffer`` is on too;
        ``n_step_buffer`` alone a ``MultiStepReplayBuffer`` with ``n_step_buffer_args.n_step``
        and the algorithm's ``gamma``; neither a plain one.
        """
        from agilerl.components.replay_memory import build_replay_memory

        multi_agent = _agent_type(algo_spec) == "multi_agent"
        refusal = (prioritized_replay_refusal(algo_spec)
                   if self.per_buffer and not multi_agent else None)
        if refusal:
            raise ValueError(refusal)
        return build_replay_memory(self, algo_spec, device=device, seed=seed,
                                   multi_agent=multi_agent)

    def init_n_step_buffer(self, algo_spec: AlgoSpec, device: str | torch.device = "cpu",
                           seed: int | None = None) -> ReplayBuffer | None:
        """A separate n-step memory when both ``per_buffer`` and ``n_step_buffer`` are on (else
        None), for code written against a two-memory Rainbow; :meth:`init_buffer`'s memory
        already folds n-step returns into its prioritized transitions, and is what
        ``LocalTrainer``'s RainbowDQN learns from."""
        if not (self.per_buffer and self.n_step_buffer):
            return None
        from agilerl.components.replay_memory import build_replay_memory

        return build_replay_memory(self.model_copy(update={"per_buffer": False}), algo_spec,
                                   device=device, seed=seed)


def _agent_type(algo_spec: object) -> str:
    kind = getattr(algo_spec, "agent_type", "single_agent")
    return str(getattr(kind, "value", kind))


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
