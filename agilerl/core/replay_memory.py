"""What the training loops ask of a replay memory: the protocols its users are typed with.

The concrete memories live in :mod:`agilerl.components` (uniform, prioritized, n-step,
joint multi-agent replay; offline datasets) and conform to these structurally (mypy checks
them where they are built). A loop that needs more than a protocol states (a prioritized
memory's priorities, a joint memory's per-agent rows) names the concrete class instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

BatchT_co = TypeVar("BatchT_co", covariant=True)


class ReplayMemory(Protocol[BatchT_co]):
    """A memory the loops sample batches from (a replay memory, an offline dataset)."""

    def __len__(self) -> int:
        """Transitions held."""
        ...

    def sample(self, batch_size: int, *, rng: np.random.Generator) -> BatchT_co:
        """``batch_size`` transitions drawn with ``rng`` (the calling loop's own generator,
        seeded from its call's seed, so a call repeats exactly)."""
        ...


class TransitionMemory(ReplayMemory["dict[str, np.ndarray]"], Protocol):
    """A replay memory the single-agent env loops (off-policy, bandit) store transitions
    in: one field per transition part (``obs``, ``action``, ``reward``, ...)."""

    def add(self, transitions: Mapping[str, ArrayLike] | None = None,
            **fields: ArrayLike) -> None:
        """Store a batch of transitions (every field has the same leading dimension)."""
        ...

    def add_vector_step(self, env_ids: ArrayLike, truncated: ArrayLike | None = None,
                        **fields: ArrayLike) -> None:
        """Store one vector step's transitions, one row per sub-env in ``env_ids`` (an
        n-step memory folds them first; ``truncated`` ends a window)."""
        ...

    def end_streams(self) -> None:
        """The env's episodes stop here: store what n-step windows still hold."""
        ...
