"""Rollout storage for on-policy learning from a vector env, with GAE.

Arrays are ``(num_steps, num_envs, ...)`` and preallocated. Each step stores the
observation the action was taken in (as ``ObsEncoder.numpy`` gives it: flat float32
vectors, images in their own dtype, structured rows for Tuple/Dict spaces), the stored action (for PPO the raw Gaussian sample),
its log-probability, the value estimate, the reward, whether the episode ended there, and
a ``valid`` flag: False for Gymnasium's NEXT_STEP autoreset steps, which are not
transitions and are excluded from advantages and losses.

Truncation is handled by the collector: it adds ``gamma * V(final_obs)`` to the reward of
a truncated step and marks it ended, so GAE never bootstraps across an episode boundary.

Recurrent policies also store, at each step, the recurrent state the action was taken from
(``hidden``: name -> ``(num_envs, ...)`` array per step). ``sequences`` cuts the rollout
into BPTT sequences of ``max_seq_len`` steps per sub-env (``BPTT_SEQUENCE_TYPES``); each
sequence starts from the stored state of its first step and marks the steps where a new
episode starts inside it (the collector zeroed the state before them: after a step that
ended an episode, and after a NEXT_STEP autoreset step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

#: How a rollout of ``T`` steps is cut into sequences of ``L = max_seq_len`` steps, per
#: sub-env (the values of the PPO spec's ``bptt_sequence_type``):
#: ``chunked``: consecutive, non-overlapping chunks (the last may be shorter, padded);
#: ``fifty_percent_overlap``: windows of ``L`` every ``L // 2`` steps, the last one
#: ending at the rollout's end; ``maximum``: every window of ``L`` steps (stride 1).
BPTT_SEQUENCE_TYPES = ("chunked", "fifty_percent_overlap", "maximum")


class Sequences(TypedDict):
    """``RolloutBuffer.sequences``: ``(L, N, ...)`` arrays for ``N`` sequences of ``L`` steps,
    and the recurrent state at each sequence's first step (name -> ``(N, ...)``)."""

    obs: np.ndarray
    actions: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray
    mask: np.ndarray
    starts: np.ndarray
    hidden: dict[str, np.ndarray]


class RolloutBuffer:
    """Fixed-length rollout of ``num_steps`` vector steps over ``num_envs`` sub-envs."""

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_dim: int | tuple[tuple[int, ...], DTypeLike],
        action_shape: tuple[int, ...],
        action_dtype: DTypeLike,
    ):
        self.num_steps, self.num_envs = int(num_steps), int(num_envs)
        shape = (self.num_steps, self.num_envs)
        # A flat float32 width, or (row shape, dtype) of the observation batches stored
        # (``ObsEncoder.shape``/``dtype``: uint8 images and structured composite rows).
        obs_shape: tuple[int, ...]
        obs_dtype: np.dtype[np.generic]
        if isinstance(obs_dim, int):
            obs_shape, obs_dtype = (int(obs_dim),), np.dtype(np.float32)
        else:
            obs_shape, obs_dtype = tuple(obs_dim[0]), np.dtype(obs_dim[1])
        self.obs = np.zeros((*shape, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((*shape, *action_shape), dtype=action_dtype)
        self.log_probs = np.zeros(shape, dtype=np.float32)
        self.values = np.zeros(shape, dtype=np.float32)
        self.rewards = np.zeros(shape, dtype=np.float32)
        self.ended = np.zeros(shape, dtype=np.float32)
        self.valid = np.zeros(shape, dtype=bool)
        self.advantages = np.zeros(shape, dtype=np.float32)
        self.returns = np.zeros(shape, dtype=np.float32)
        self.hidden: dict[str, np.ndarray] = {}
        self.pos = 0

    def reset(self) -> None:
        self.pos = 0

    @property
    def full(self) -> bool:
        return self.pos == self.num_steps

    def add(
        self,
        obs: ArrayLike,
        action: ArrayLike,
        log_prob: ArrayLike,
        value: ArrayLike,
        reward: ArrayLike,
        ended: ArrayLike,
        valid: ArrayLike,
        hidden: Mapping[str, ArrayLike] | None = None,
    ) -> None:
        t = self.pos
        for name, state in (hidden or {}).items():
            state = np.asarray(state, dtype=np.float32)
            stored = self.hidden.get(name)
            if stored is None or stored.shape[1:] != state.shape:
                stored = self.hidden[name] = np.zeros((self.num_steps, *state.shape), np.float32)
            stored[t] = state
        self.obs[t] = np.asarray(obs, dtype=self.obs.dtype).reshape(self.obs.shape[1:])
        self.actions[t] = np.asarray(action).reshape(self.actions.shape[1:])
        self.log_probs[t] = log_prob
        self.values[t] = value
        self.rewards[t] = reward
        self.ended[t] = ended
        self.valid[t] = valid
        self.pos += 1

    def compute_gae(self, last_value: np.ndarray, gamma: float, gae_lambda: float) -> None:
        """Generalised advantage estimation over the stored steps (and ``returns``).

        ``last_value`` = V(observation after the last stored step). Invalid steps get zero
        advantage and are never bootstrapped from (the step before them has ended).
        """
        last_gae = np.zeros(self.num_envs, dtype=np.float32)
        next_value = np.asarray(last_value, dtype=np.float32)
        for t in reversed(range(self.pos)):
            not_ended = 1.0 - self.ended[t]
            delta = self.rewards[t] + gamma * next_value * not_ended - self.values[t]
            last_gae = delta + gamma * gae_lambda * not_ended * last_gae
            last_gae = np.where(self.valid[t], last_gae, 0.0).astype(np.float32)
            self.advantages[t] = last_gae
            next_value = self.values[t]
        self.returns[: self.pos] = self.advantages[: self.pos] + self.values[: self.pos]

    def flat(self) -> dict[str, np.ndarray]:
        """Valid samples of the rollout, flattened over steps and sub-envs."""
        mask = self.valid[: self.pos].reshape(-1)
        n = self.pos * self.num_envs
        return {
            "obs": self.obs[: self.pos].reshape(n, *self.obs.shape[2:])[mask],
            "actions": self.actions[: self.pos].reshape(n, *self.actions.shape[2:])[mask],
            "log_probs": self.log_probs[: self.pos].reshape(n)[mask],
            "values": self.values[: self.pos].reshape(n)[mask],
            "advantages": self.advantages[: self.pos].reshape(n)[mask],
            "returns": self.returns[: self.pos].reshape(n)[mask],
        }

    def sequence_starts(self, max_seq_len: int, sequence_type: str) -> np.ndarray:
        """First time index of each sequence (the same for every sub-env)."""
        steps, length = self.pos, min(int(max_seq_len), self.pos)
        if sequence_type == "chunked":
            return np.arange(0, steps, length)
        if sequence_type == "fifty_percent_overlap":
            firsts = list(range(0, steps - length + 1, max(1, length // 2)))
        elif sequence_type == "maximum":
            firsts = list(range(0, steps - length + 1))
        else:
            raise ValueError(
                f"unknown bptt_sequence_type {sequence_type!r}; expected one of "
                f"{', '.join(BPTT_SEQUENCE_TYPES)}"
            )
        if firsts[-1] + length < steps:  # the tail is always covered
            firsts.append(steps - length)
        return np.asarray(firsts)

    def sequences(self, max_seq_len: int, sequence_type: str) -> Sequences:
        """The rollout as BPTT sequences, time first: arrays ``(L, N, ...)`` for ``N``
        sequences of ``L`` steps, and ``hidden`` (name -> ``(N, ...)``, the stored state
        at each sequence's first step).

        ``mask`` is False on padding and on invalid steps (excluded from losses);
        ``starts`` is True where an episode starts after the sequence's first step.
        """
        length = min(int(max_seq_len), self.pos)
        firsts = self.sequence_starts(max_seq_len, sequence_type)
        # time[l, s, e]: step l of the sequence starting at firsts[s] of sub-env e
        time = firsts[None, :] + np.arange(length)[:, None]
        inside = time < self.pos
        time = np.minimum(time, self.pos - 1)
        n_env = self.num_envs
        t_idx = np.repeat(time[:, :, None], n_env, axis=2).reshape(length, -1)
        e_idx = np.broadcast_to(np.arange(n_env), (*time.shape, n_env)).reshape(length, -1)
        in_range = np.repeat(inside[:, :, None], n_env, axis=2).reshape(length, -1)
        reset_before = np.zeros((self.pos, n_env), dtype=bool)
        reset_before[1:] = (self.ended[: self.pos - 1] > 0) | ~self.valid[: self.pos - 1]

        def take(array: np.ndarray) -> np.ndarray:
            return array[t_idx, e_idx]

        out: Sequences = {
            "obs": take(self.obs),
            "actions": take(self.actions),
            "log_probs": take(self.log_probs),
            "values": take(self.values),
            "advantages": take(self.advantages),
            "returns": take(self.returns),
            "mask": take(self.valid) & in_range,
            "starts": take(reset_before),
            "hidden": {k: v[t_idx[0], e_idx[0]] for k, v in self.hidden.items()},
        }
        return out
