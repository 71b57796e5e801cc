"""The replay memory a ``replay_buffer`` section asks for: the one place that builds it.

``LocalTrainer`` and ``ReplayBufferSpec.init_buffer`` both build through
:func:`build_replay_memory`, so a prioritized n-step memory is the same object whichever
asked for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from agilerl.components.multi_agent_replay_buffer import MultiAgentReplayBuffer
from agilerl.components.replay_buffer import (
    MultiStepReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
)

if TYPE_CHECKING:
    import numpy as np
    import torch

    from agilerl.components.offline_dataset import OfflineDataset
    from agilerl.core.replay_memory import ReplayMemory, TransitionMemory
    from agilerl.models.training import ReplayBufferSpec

    # The protocols the training loops read memories through: mypy checks that every
    # memory built here (and the offline dataset) conforms to them.
    _UNIFORM: type[TransitionMemory] = ReplayBuffer
    _N_STEP: type[TransitionMemory] = MultiStepReplayBuffer
    _PRIORITIZED: type[TransitionMemory] = PrioritizedReplayBuffer
    _JOINT: type[ReplayMemory[dict[str, dict[str, np.ndarray]]]] = MultiAgentReplayBuffer
    _DATASET: type[ReplayMemory[object]] = OfflineDataset


class _Folding(TypedDict, total=False):
    """How an n-step memory folds transitions (nothing: one-step transitions)."""

    n_step: int
    gamma: float
    keep_one_step: bool


def algorithm_gamma(algorithm_spec: object) -> float:
    """The discount an n-step memory folds rewards with: the algorithm's ``gamma``."""
    gamma = getattr(algorithm_spec, "gamma", None)
    if isinstance(gamma, bool) or not isinstance(gamma, int | float):
        raise ValueError("Gamma must be specified for N-step buffer (the algorithm has no "
                         "numeric 'gamma')")
    return float(gamma)


def build_replay_memory(buffer_spec: ReplayBufferSpec, algorithm_spec: object, *,
                        device: str | torch.device = "cpu",
                        seed: int | None = None, multi_agent: bool = False,
                        joint: bool = False) -> ReplayBuffer:
    """The memory of a ``ReplayBufferSpec`` for an algorithm.

    Multi-agent algorithms ignore the n-step and PER flags: a memory of joint transitions
    when ``joint`` (what the multi-agent loops store), else a plain one. Otherwise
    ``per_buffer`` gives a :class:`PrioritizedReplayBuffer` (``per_buffer_args.alpha``),
    ``n_step_buffer`` folds transitions into ``n_step_buffer_args.n_step``-step returns with
    the algorithm's ``gamma`` (both: a prioritized memory of n-step transitions, keeping the
    one-step ones too when the algorithm's ``combined_reward`` asks for them), neither a
    plain :class:`ReplayBuffer`. Whether the algorithm can learn from what it is given is
    the caller's check (its ``replay_features``).
    """
    size = int(buffer_spec.max_size)
    if multi_agent:
        memory_class = MultiAgentReplayBuffer if joint else ReplayBuffer
        return memory_class(size, device=device, seed=seed)
    per, n_step = bool(buffer_spec.per_buffer), bool(buffer_spec.n_step_buffer)
    if not (per or n_step):
        return ReplayBuffer(size, device=device, seed=seed)
    folding: _Folding = {}  # a prioritized memory of one-step transitions folds nothing
    if n_step:
        folding = {"n_step": int(buffer_spec.n_step_buffer_args.n_step),
                   "gamma": algorithm_gamma(algorithm_spec),
                   "keep_one_step": bool(getattr(algorithm_spec, "combined_reward", False))}
    if per:
        return PrioritizedReplayBuffer(size, alpha=float(buffer_spec.per_buffer_args.alpha),
                                       device=device, seed=seed, **folding)
    return MultiStepReplayBuffer(size, device=device, seed=seed, **folding)
