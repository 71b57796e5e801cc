"""Replay buffers: preallocated numpy ring buffers filled a vector-env step at a time.

Storage is allocated on the first ``add`` from the shapes and dtypes of the fields seen
(``obs``, ``action``, ``reward``, ``next_obs``, ``done`` for the off-policy loops, but any
names work), so adding a batch of ``num_envs`` transitions is one slice assignment per
field (two when it wraps) and no Python objects are created per transition.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from typing import NotRequired  # Python 3.11; only in annotations here

    import torch


class WindowState(TypedDict):
    """``NStepWindow.state_dict``: its settings and the transitions its windows hold."""

    n_step: int
    gamma: float
    keep_one_step: bool
    pending: dict[int, list[dict[str, np.ndarray]]]


class ReplayState(TypedDict):
    """``ReplayBuffer.state_dict``: the stored rows, the write position and the RNG."""

    max_size: int
    pos: int
    size: int
    counter: int
    data: dict[str, np.ndarray]
    rng: Mapping[str, object]
    """The numpy bit generator's ``state``."""
    window: WindowState | None
    alpha: NotRequired[float]
    """A prioritized memory's (with ``tree`` and ``max_priority``: its sum tree)."""
    tree: NotRequired[np.ndarray]
    max_priority: NotRequired[float]


class ReplayBuffer:
    """Uniform experience replay of at most ``max_size`` transitions.

    ``sample`` draws with replacement from a numpy ``Generator``: the one passed in, or the
    buffer's own (seeded by ``seed``; its state is part of ``state_dict``).
    """

    def __init__(self, max_size: int, device: str | torch.device = "cpu",
                 seed: int | None = None):
        if int(max_size) < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        self.max_size = int(max_size)
        self.device = device
        self.rng = np.random.default_rng(seed)
        self._data: dict[str, np.ndarray] = {}
        self.pos = 0
        self.size = 0
        self.counter = 0  # transitions ever added
        #: n-step folding in front of the storage (None: transitions are stored as given)
        self.window: NStepWindow | None = None
        #: While journaling: the rows each ``add`` overwrote, oldest first (see ``rollback``).
        self._journal: list[tuple[np.ndarray, dict[str, np.ndarray]]] | None = None

    def __len__(self) -> int:
        return self.size

    def _allocate(self, batch: Mapping[str, np.ndarray]) -> None:
        self._data = {
            name: np.zeros((self.max_size, *value.shape[1:]), dtype=value.dtype)
            for name, value in batch.items()
        }

    def add(self, transitions: Mapping[str, ArrayLike] | None = None, **fields: ArrayLike) -> None:
        """Add a batch of transitions: every field has the same leading batch dimension."""
        batch = {k: np.asarray(v) for k, v in {**(transitions or {}), **fields}.items()}
        if not self._data:
            self._allocate(batch)
        if set(batch) != set(self._data):
            raise KeyError(
                f"transition fields {sorted(batch)} != buffer fields {sorted(self._data)}"
            )
        n = len(next(iter(batch.values())))
        if n == 0:
            return
        if n > self.max_size:  # only the newest max_size survive anyway
            batch = {k: v[-self.max_size :] for k, v in batch.items()}
            self.counter += n - self.max_size
            n = self.max_size
        if self._journal is not None:
            slots = (self.pos + np.arange(n)) % self.max_size
            self._journal.append((slots, {k: v[slots] for k, v in self._data.items()}))
        first = min(n, self.max_size - self.pos)
        for name, value in batch.items():
            store = self._data[name]
            store[self.pos : self.pos + first] = value[:first]
            if first < n:
                store[: n - first] = value[first:]
        self.pos = (self.pos + n) % self.max_size
        self.size = min(self.size + n, self.max_size)
        self.counter += n

    def add_vector_step(self, env_ids: ArrayLike, truncated: ArrayLike | None = None,
                        **fields: ArrayLike) -> None:
        """Add one vector step's valid transitions (one row per sub-env in ``env_ids``);
        with an n-step window they are folded first, and ``truncated`` ends a window
        (``done`` is the terminated flag)."""
        if self.window is None:
            self.add(fields)
            return
        folded = self.window.push(env_ids, truncated, **fields)
        if folded is not None:
            self.add(folded)

    def end_streams(self) -> None:
        """The vector env's episodes stop here (it will be reset): store what the n-step
        windows hold, as truncated episodes. Nothing to do without a window."""
        if self.window is not None:
            folded = self.window.flush()
            if folded is not None:
                self.add(folded)

    def sample(
        self, batch_size: int, rng: np.random.Generator | None = None
    ) -> dict[str, np.ndarray]:
        """``batch_size`` transitions drawn uniformly with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = (rng or self.rng).integers(0, self.size, size=int(batch_size))
        return {name: store[index] for name, store in self._data.items()}

    # ------------------------------------------------------------------ journal
    def start_journal(self) -> None:
        """Remember what ``add`` overwrites from now on, so :meth:`rollback` can undo it."""
        self._journal = []

    def rollback(self, pos: int, size: int, counter: int) -> None:
        """Undo every ``add`` since :meth:`start_journal` (write position, size and counter
        go back to the given values) and stop journaling."""
        journal, self._journal = self._journal or [], None
        for slots, rows in reversed(journal):
            for name, value in rows.items():
                self._data[name][slots] = value
        if size == 0:
            self._data = {}
        self.pos, self.size, self.counter = int(pos), int(size), int(counter)

    def clear(self) -> None:
        self._data = {}
        self.pos = self.size = self.counter = 0
        if self.window is not None:
            self.window.pending = {}

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> ReplayState:
        """Contents (oldest first is not needed: stored as-is with the write position)."""
        return {
            "max_size": self.max_size,
            "pos": self.pos,
            "size": self.size,
            "counter": self.counter,
            "data": {k: v[: self.size].copy() for k, v in self._data.items()},
            "rng": copy.deepcopy(self.rng.bit_generator.state),
            "window": self.window.state_dict() if self.window is not None else None,
        }

    def load_state_dict(self, state: ReplayState) -> None:
        self.max_size = int(state["max_size"])
        self.pos, self.size, self.counter = (
            int(state["pos"]),
            int(state["size"]),
            int(state["counter"]),
        )
        self._data = {}
        for name, value in state["data"].items():
            store = np.zeros((self.max_size, *value.shape[1:]), dtype=value.dtype)
            store[: self.size] = value
            self._data[name] = store
        self.rng.bit_generator.state = copy.deepcopy(state["rng"])
        window = state.get("window")
        if (window is None) != (self.window is None):
            raise ValueError(
                "replay state and buffer disagree on n-step returns (saved with "
                f"{'an' if window is not None else 'no'} n-step window, loading into a buffer "
                f"with {'one' if self.window is not None else 'none'})"
            )
        if self.window is not None and window is not None:
            self.window.load_state_dict(window)


class NStepWindow:
    """Per-sub-env windows of the last ``n_step`` transitions, folded into n-step ones.

    ``push`` takes one vector step's valid rows; a window emits
    ``(obs_t, action_t, R_t^(k), next_obs_{t+k}, done_{t+k}, n=k)`` with
    ``R = sum_i gamma^i r_{t+i}`` once it holds ``n_step`` transitions, and flushes every
    transition it holds when an episode ends (``done`` or ``truncated``), so ``k < n_step``
    near episode ends. A learner discounts ``next_obs`` by ``gamma ** n``. With
    ``keep_one_step`` the first transition's own ``reward``, ``next_obs`` and ``done`` are
    kept too (as ``one_step_*``), for losses that combine one-step and n-step targets.
    """

    ONE_STEP_FIELDS = ("reward", "next_obs", "done")

    def __init__(self, n_step: int, gamma: float, keep_one_step: bool = False) -> None:
        if int(n_step) < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        self.n_step = int(n_step)
        self.gamma = float(gamma)
        self.keep_one_step = bool(keep_one_step)
        self.pending: dict[int, list[dict[str, np.ndarray]]] = {}

    def push(
        self, env_ids: ArrayLike, truncated: ArrayLike | None = None, **fields: ArrayLike
    ) -> dict[str, np.ndarray] | None:
        """Add one transition per sub-env in ``env_ids``; the folded transitions now
        complete, stacked (None when there are none)."""
        rows = {k: np.asarray(v) for k, v in fields.items()}
        ids = np.asarray(env_ids).reshape(-1).tolist()
        cut = np.zeros(len(ids), dtype=bool) if truncated is None else np.asarray(truncated)
        out: list[dict[str, np.ndarray]] = []
        for j, env_id in enumerate(ids):
            queue = self.pending.setdefault(int(env_id), [])
            queue.append({k: v[j] for k, v in rows.items()})
            if bool(queue[-1]["done"]) or bool(cut[j]):
                self._drain(queue, out)
            elif len(queue) == self.n_step:
                out.append(self._fold(queue))
                queue.pop(0)
        return _stacked(out)

    def flush(self) -> dict[str, np.ndarray] | None:
        """End every open window as a truncated episode: its transitions, folded (None
        when there are none). For streams that stop mid-episode (the env is reset)."""
        out: list[dict[str, np.ndarray]] = []
        for env_id in sorted(self.pending):
            self._drain(self.pending[env_id], out)
        self.pending = {}
        return _stacked(out)

    def _drain(self, queue: list[dict[str, np.ndarray]], out: list[dict[str, np.ndarray]]) -> None:
        while queue:
            out.append(self._fold(queue))
            queue.pop(0)

    def _fold(self, queue: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        first, last = queue[0], queue[-1]
        ret: np.ndarray = np.zeros_like(first["reward"], dtype=np.float32)
        for i, step in enumerate(queue):
            ret = ret + (self.gamma**i) * step["reward"]
        folded = {**first, "reward": ret, "next_obs": last["next_obs"], "done": last["done"]}
        folded["n"] = np.asarray(len(queue), dtype=np.int64)
        if self.keep_one_step:
            for name in self.ONE_STEP_FIELDS:
                folded[f"one_step_{name}"] = first[name]
        return folded

    def state_dict(self) -> WindowState:
        return {"n_step": self.n_step, "gamma": self.gamma,
                "keep_one_step": self.keep_one_step, "pending": copy.deepcopy(self.pending)}

    def load_state_dict(self, state: WindowState) -> None:
        self.n_step, self.gamma = int(state["n_step"]), float(state["gamma"])
        self.keep_one_step = bool(state["keep_one_step"])
        self.pending = {int(k): list(v) for k, v in copy.deepcopy(dict(state["pending"])).items()}


def _stacked(rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray] | None:
    return {k: np.stack([t[k] for t in rows]) for k in rows[0]} if rows else None


class MultiStepReplayBuffer(ReplayBuffer):
    """Replay of n-step transitions, built per sub-env from a vector env's stream
    (see :class:`NStepWindow`). Transitions marked ``valid=False`` (autoreset steps) must
    not be passed in."""

    def __init__(
        self, max_size: int, n_step: int, gamma: float, device: str | torch.device = "cpu",
        seed: int | None = None, keep_one_step: bool = False,
    ):
        super().__init__(max_size, device=device, seed=seed)
        self.window: NStepWindow = NStepWindow(n_step, gamma, keep_one_step)

    @property
    def n_step(self) -> int:
        return self.window.n_step

    @property
    def gamma(self) -> float:
        return self.window.gamma


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) over a numpy sum tree.

    A transition is drawn with probability ``p_i ** alpha / sum_j p_j ** alpha``; new
    transitions get the largest priority seen so far. ``sample(batch_size, beta=beta)`` also
    returns ``weights`` (importance-sampling weights ``(N * P(i)) ** -beta`` normalised by
    their maximum) and ``indices`` to pass back to ``update_priorities`` with the new
    TD errors. Sampling is stratified: one draw per equal slice of the total priority.
    """

    def __init__(
        self, max_size: int, alpha: float, device: str | torch.device = "cpu",
        seed: int | None = None,
        n_step: int = 1, gamma: float = 0.99, keep_one_step: bool = False,
    ):
        super().__init__(max_size, device=device, seed=seed)
        if n_step > 1 or keep_one_step:  # prioritized n-step replay: fold, then prioritize
            self.window = NStepWindow(n_step, gamma, keep_one_step)
        self.alpha = float(alpha)
        self._leaves = 1 << max(0, (self.max_size - 1).bit_length())
        self._tree = np.zeros(2 * self._leaves, dtype=np.float64)
        self.max_priority = 1.0

    def add(self, transitions: Mapping[str, ArrayLike] | None = None, **fields: ArrayLike) -> None:
        start = self.pos
        before = self.counter
        super().add(transitions, **fields)
        n = min(self.counter - before, self.max_size)
        slots = (start + np.arange(n)) % self.max_size if n else np.zeros(0, dtype=np.int64)
        if n and self.counter - before > self.max_size:  # oversized batch: newest kept
            slots = np.arange(self.max_size)
        self._set(slots, np.full(len(slots), self.max_priority**self.alpha))

    def _set(self, slots: np.ndarray, values: np.ndarray) -> None:
        nodes = slots + self._leaves
        self._tree[nodes] = values
        nodes = np.unique(nodes // 2)
        while nodes.size and nodes[0] >= 1:
            self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]
            if nodes[0] == 1:
                break
            nodes = np.unique(nodes // 2)

    def _find(self, mass: np.ndarray) -> np.ndarray:
        """Leaf index holding each prefix-sum ``mass`` (vectorised tree descent)."""
        nodes = np.ones(len(mass), dtype=np.int64)
        mass = mass.copy()
        while nodes[0] < self._leaves:
            left = 2 * nodes
            go_right = mass > self._tree[left]
            mass = np.where(go_right, mass - self._tree[left], mass)
            nodes = np.where(go_right, left + 1, left)
        return np.minimum(nodes - self._leaves, self.size - 1)

    def sample(
        self, batch_size: int, rng: np.random.Generator | None = None, *, beta: float = 0.4
    ) -> dict[str, np.ndarray]:
        """``batch_size`` transitions drawn in proportion to their priorities, with the
        ``weights`` for exponent ``beta`` and the ``indices`` for ``update_priorities``.
        The generator comes second as in :meth:`ReplayBuffer.sample`; ``beta`` is
        keyword-only so a generator passed by position can never be taken for it."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        gen = rng or self.rng
        total = self._tree[1]
        bounds = np.linspace(0.0, total, int(batch_size) + 1)
        mass = gen.uniform(bounds[:-1], bounds[1:])
        index = self._find(mass)
        probs = self._tree[index + self._leaves] / total
        weights = (self.size * probs) ** (-float(beta))
        batch = {name: store[index] for name, store in self._data.items()}
        batch["weights"] = (weights / weights.max()).astype(np.float32)
        batch["indices"] = index
        return batch

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set new (positive) priorities, e.g. ``|TD error| + eps``, for sampled rows."""
        priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self._set(np.asarray(indices, dtype=np.int64).reshape(-1), priorities**self.alpha)

    def state_dict(self) -> ReplayState:
        return {**super().state_dict(), "alpha": self.alpha, "tree": self._tree.copy(),
                "max_priority": self.max_priority}

    def load_state_dict(self, state: ReplayState) -> None:
        super().load_state_dict(state)
        self.alpha = float(state["alpha"])
        self._leaves = 1 << max(0, (self.max_size - 1).bit_length())
        self._tree = np.array(state["tree"], dtype=np.float64)
        self.max_priority = float(state["max_priority"])
