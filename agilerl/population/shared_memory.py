"""A population's shared replay memory under the generation rule.

Members of one generation may train at the same time, in different processes, so none of
them can see what a sibling collects in the same generation. The rule every backend
follows: during a generation's training phase, a member trains on the memory as it was when
the phase began plus its own transitions (and its own priority updates, for a prioritized
memory); when every member has trained, their additions are merged in member order. The
result is a pure function of the members and seeds, whichever process trained whom.

:class:`SharedReplay` implements the rule around the one buffer object the member trainers
hold (the *working* buffer) and a private copy of the memory at the start of the phase (the
*committed* buffer). A member's contribution is an :class:`ExperienceDelta`: a few
generations' worth of rows, cheap to send between processes, so worker processes keep
replicas of the memory in step by applying the same deltas in the same order.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from agilerl.components.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer

PENDING_KEY = "pending_experience"
"""Key of the replay state (checkpoints) listing members' deltas not yet merged."""


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, state: Mapping[str, Any]) -> ExperienceDelta:
        return cls(**dict(state))


def shareable(memory: Any) -> bool:
    """True when ``memory`` is a buffer :class:`SharedReplay` can run the rule on."""
    return isinstance(memory, ReplayBuffer)


class SharedReplay:
    """The generation rule around ``memory`` (the buffer the member trainers write to).

    ``begin_member()`` before a member trains, ``end_member()`` after (its delta, also kept
    as pending), ``end_phase()`` once every member has trained. ``pending`` resumes a phase
    interrupted after some members trained (from a checkpoint's replay state).
    """

    def __init__(self, memory: ReplayBuffer,
                 pending: Sequence[ExperienceDelta | Mapping[str, Any]] = ()) -> None:
        if not shareable(memory):
            raise TypeError(f"{type(memory).__name__} is not a replay buffer")
        if memory.window is not None and memory.window.pending:
            raise ValueError("the shared memory has open n-step windows between members")
        self.working = memory
        self.committed = copy.deepcopy(memory)
        self.pending: list[ExperienceDelta] = [
            d if isinstance(d, ExperienceDelta) else ExperienceDelta.from_dict(d)
            for d in pending
        ]
        self._dirty: np.ndarray | None = None  # working slots that differ from committed

    # ------------------------------------------------------------------ one member
    def begin_member(self) -> None:
        """Make the working buffer equal to the committed one again."""
        self._restore_working()

    def end_member(self) -> ExperienceDelta:
        """What the member just trained added (also appended to ``pending``)."""
        delta = self._diff()
        self.pending.append(delta)
        return delta

    # ------------------------------------------------------------------ the phase
    def end_phase(self, deltas: Sequence[ExperienceDelta] | None = None) -> None:
        """Merge ``deltas`` (default: the pending ones) into the memory, in order."""
        merged = self.pending if deltas is None else list(deltas)
        self._restore_working()
        start = (self.committed.pos, self.committed.size)
        appended = 0
        for delta in merged:
            appended += _apply(self.committed, delta, start, appended)
        appended = 0
        for delta in merged:
            appended += _apply(self.working, delta, start, appended)
        self.pending = []

    def state_dict(self) -> dict[str, Any]:
        """The committed memory's state, plus the pending deltas of an unfinished phase."""
        state = self.committed.state_dict()
        if self.pending:
            state[PENDING_KEY] = [d.as_dict() for d in self.pending]
        return state

    def suspend(self) -> None:
        """Leave the working buffer equal to the committed one (training stops here)."""
        self._restore_working()

    # ------------------------------------------------------------------ internals
    def _restore_working(self) -> None:
        work, base = self.working, self.committed
        if not base._data:  # the memory was empty when the phase began
            work._data = {}
        elif not work._data:
            work._data = {k: v.copy() for k, v in base._data.items()}
        elif self._dirty is not None and self._dirty.size:
            for name, store in work._data.items():
                store[self._dirty] = base._data[name][self._dirty]
        work.pos, work.size, work.counter = base.pos, base.size, base.counter
        if isinstance(work, PrioritizedReplayBuffer) and isinstance(base, PrioritizedReplayBuffer):
            np.copyto(work._tree, base._tree)
            work.max_priority = base.max_priority
        self._dirty = None

    def _diff(self) -> ExperienceDelta:
        work, base = self.working, self.committed
        added = work.counter - base.counter
        kept = min(added, work.max_size)
        slots = (work.pos - kept + np.arange(kept)) % work.max_size
        self._dirty = slots
        rows = {name: store[slots].copy() for name, store in work._data.items()}
        delta = ExperienceDelta(rows=rows, added=int(added))
        if isinstance(work, PrioritizedReplayBuffer) and isinstance(base, PrioritizedReplayBuffer):
            leaves = work._tree[work._leaves:work._leaves + base.size]
            changed = np.flatnonzero(leaves != base._tree[base._leaves:base._leaves + base.size])
            changed = changed[~np.isin(changed, slots)]
            delta.leaves = work._tree[slots + work._leaves].copy()
            delta.touched_slots = changed
            delta.touched_leaves = leaves[changed].copy()
            delta.max_priority = float(work.max_priority)
        return delta


def _apply(memory: ReplayBuffer, delta: ExperienceDelta, start: tuple[int, int],
           appended: int) -> int:
    """Append ``delta`` to ``memory`` (whose phase began at write position/size ``start``,
    ``appended`` rows ago); return the rows appended."""
    kept = len(next(iter(delta.rows.values()))) if delta.rows else 0
    first = memory.pos
    if kept:
        memory.add(delta.rows)
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
