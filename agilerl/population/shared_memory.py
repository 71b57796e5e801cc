"""A population's shared replay memory under the generation rule.

Members of one generation may train at the same time, in different processes, so none of
them can see what a sibling collects in the same generation. The rule every backend
follows: during a generation's training phase, a member trains on the memory as it was when
the phase began plus its own transitions (and its own priority updates, for a prioritized
memory); when every member has trained, their additions are merged in member order. The
result is a pure function of the members and seeds, whichever process trained whom.

:class:`SharedReplay` implements the rule on the one buffer object the member trainers hold:
it records what a member adds, then undoes it. A member's contribution is an
:class:`ExperienceDelta` (the rows it added, one generation's worth, cheap to send between
processes), so worker processes keep replicas of the memory in step by applying the same
deltas in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, TypeGuard, cast

import numpy as np

from agilerl.components.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer

PENDING_KEY = "pending_experience"
"""Key of the replay state (checkpoints) listing members' deltas not yet merged."""


class ExperienceDeltaState(TypedDict):
    """:class:`ExperienceDelta` as a dict (:meth:`ExperienceDelta.as_dict`), as checkpoints
    keep it."""

    rows: dict[str, np.ndarray]
    added: int
    leaves: np.ndarray | None
    touched_slots: np.ndarray | None
    touched_leaves: np.ndarray | None
    max_priority: float | None


@dataclass
class ExperienceDelta:
    """What one member added to the shared memory during one training phase."""

    rows: dict[str, np.ndarray]
    """The stored transitions it added, oldest first (at most the memory's size)."""
    added: int
    """Transitions it added in all (more than ``len(rows)`` when the memory wrapped)."""
    leaves: np.ndarray | None = None
    """Prioritized memory: the final sum-tree leaf value of each row."""
    touched_slots: np.ndarray | None = None
    """Prioritized memory: slots of older rows whose priority the member changed..."""
    touched_leaves: np.ndarray | None = None
    """...and their final leaf values."""
    max_priority: float | None = None

    def as_dict(self) -> ExperienceDeltaState:
        return cast(ExperienceDeltaState, asdict(self))

    @classmethod
    def from_dict(cls, state: ExperienceDeltaState) -> ExperienceDelta:
        return cls(**state)


def shareable(memory: object) -> TypeGuard[ReplayBuffer]:
    """True when ``memory`` is a buffer :class:`SharedReplay` can run the rule on."""
    return isinstance(memory, ReplayBuffer)


class SharedReplay:
    """The generation rule around ``memory`` (the buffer the member trainers write to).

    ``begin_member()`` before a member trains, ``end_member()`` after: it returns the
    member's delta (also kept as pending) and undoes the member's writes, so between members
    the buffer always holds the memory as the phase began. ``end_phase()`` once every member
    has trained. ``pending`` resumes a phase interrupted after some members trained (from a
    checkpoint's replay state). No second copy of the memory is kept: the buffer journals
    the rows a member overwrites (:meth:`ReplayBuffer.start_journal`).
    """

    def __init__(self, memory: ReplayBuffer,
                 pending: Sequence[ExperienceDelta | ExperienceDeltaState] = ()) -> None:
        if not shareable(memory):
            raise TypeError(f"{type(memory).__name__} is not a replay buffer")
        if memory.window is not None and memory.window.pending:
            raise ValueError("the shared memory has open n-step windows between members")
        self.memory = memory
        self.pending: list[ExperienceDelta] = [
            d if isinstance(d, ExperienceDelta) else ExperienceDelta.from_dict(d)
            for d in pending
        ]
        self._base: tuple[int, int, int] | None = None  # pos, size, counter at begin_member
        self._tree: np.ndarray | None = None
        self._max_priority = 1.0

    # ------------------------------------------------------------------ one member
    def begin_member(self) -> None:
        """Start recording what the next member changes."""
        memory = self.memory
        self._base = (memory.pos, memory.size, memory.counter)
        if isinstance(memory, PrioritizedReplayBuffer):
            self._tree = memory._tree.copy()
            self._max_priority = memory.max_priority
        memory.start_journal()

    def end_member(self) -> ExperienceDelta:
        """What the member just trained added (also appended to ``pending``); the buffer
        is put back as it was at :meth:`begin_member`."""
        if self._base is None:
            raise RuntimeError("end_member() without begin_member()")
        delta = self._diff(*self._base)
        self.memory.rollback(*self._base)
        if isinstance(self.memory, PrioritizedReplayBuffer) and self._tree is not None:
            self.memory._tree = self._tree
            self.memory.max_priority = self._max_priority
        self._base, self._tree = None, None
        self.pending.append(delta)
        return delta

    # ------------------------------------------------------------------ the phase
    def end_phase(self, deltas: Sequence[ExperienceDelta] | None = None) -> None:
        """Merge ``deltas`` (default: the pending ones) into the memory, in order."""
        merged = self.pending if deltas is None else list(deltas)
        start = (self.memory.pos, self.memory.size)
        appended = 0
        for delta in merged:
            appended += _apply(self.memory, delta, start, appended)
        self.pending = []

    def state_dict(self) -> dict[str, object]:
        """The memory's state, plus the pending deltas of an unfinished phase."""
        state: dict[str, Any] = dict(self.memory.state_dict())
        if self.pending:
            state[PENDING_KEY] = [d.as_dict() for d in self.pending]
        return state

    # ------------------------------------------------------------------ internals
    def _diff(self, pos: int, size: int, counter: int) -> ExperienceDelta:
        memory = self.memory
        added = memory.counter - counter
        kept = min(added, memory.max_size)
        slots = (memory.pos - kept + np.arange(kept)) % memory.max_size
        rows = {name: store[slots].copy() for name, store in memory._data.items()}
        delta = ExperienceDelta(rows=rows, added=int(added))
        if isinstance(memory, PrioritizedReplayBuffer) and self._tree is not None:
            first = memory._leaves
            leaves = memory._tree[first:first + size]
            changed = np.flatnonzero(leaves != self._tree[first:first + size])
            changed = changed[~np.isin(changed, slots)]
            delta.leaves = memory._tree[slots + first].copy()
            delta.touched_slots = changed
            delta.touched_leaves = leaves[changed].copy()
            delta.max_priority = float(memory.max_priority)
        return delta


def _apply(memory: ReplayBuffer, delta: ExperienceDelta, start: tuple[int, int],
           appended: int) -> int:
    """Append ``delta`` to ``memory`` (whose phase began at write position/size ``start``,
    ``appended`` rows ago); return the rows appended."""
    kept = len(next(iter(delta.rows.values()))) if delta.rows else 0
    first = memory.pos
    if kept:
        # rows are in storage layout (one array per stored column): the plain ring write,
        # not a subclass's add (which would re-fold n-step or re-nest multi-agent fields)
        ReplayBuffer.add(memory, delta.rows)
    memory.counter += delta.added - kept
    if isinstance(memory, PrioritizedReplayBuffer) and delta.leaves is not None:
        own = (first + np.arange(kept)) % memory.max_size
        memory._set(own, delta.leaves)
        pos0, size0 = start
        overwritten = appended + kept
        slots = np.asarray(delta.touched_slots, dtype=np.int64)
        alive = (slots < size0) & ((slots - pos0) % memory.max_size >= overwritten)
        if overwritten >= memory.max_size:
            alive[:] = False
        if alive.any():
            memory._set(slots[alive], np.asarray(delta.touched_leaves)[alive])
        memory.max_priority = max(memory.max_priority, float(delta.max_priority or 0.0))
    return kept
