"""One agent's actions for a deterministic multi-agent policy (MADDPG, MATD3).

An actor's output is a vector of ``dim`` numbers; what it means depends on the space:

* ``Box`` (bounded): a normalised action in [-1, 1] per dimension (the actor's bounded
  output), mapped affinely onto the space's bounds for the environment. Exploration adds
  the agent's OU or Gaussian noise (:mod:`agilerl.algorithms.core.action_noise`) in
  normalised units and clips.
* ``Discrete(n)``: ``n`` logits. The environment gets an index: the argmax when greedy, a
  Gumbel-max sample (a draw from ``softmax(logits)``) when exploring. Critics see one-hot
  actions; the actor's loss differentiates through a straight-through Gumbel-softmax
  sample (the forward value one-hot, the gradient that of the soft sample), so the critic
  is always queried with actions of the kind it was trained on.

Replay memory stores the environment's action (index or bounded vector);
:meth:`AgentActions.critic_input` turns a stored batch into what critics read.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces

from agilerl.algorithms.core.spaces import IncompatibleSpaceError


class AgentActions:
    """Action encoding of one agent's action space (see module docs)."""

    def __init__(self, space: spaces.Space, agent: str, device: torch.device) -> None:
        self.space = space
        if isinstance(space, spaces.Discrete):
            self.discrete = True
            self.dim = int(space.n)
            self.start = int(space.start)
            return
        if not isinstance(space, spaces.Box):
            raise IncompatibleSpaceError(
                f"agent {agent!r}: MADDPG/MATD3 need a Box or Discrete action space, got {space}"
            )
        low = space.low.astype(np.float64).reshape(-1)
        high = space.high.astype(np.float64).reshape(-1)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise IncompatibleSpaceError(
                f"agent {agent!r}: a continuous action space needs finite bounds (the "
                f"policy's output is scaled onto them), got {space}"
            )
        self.discrete = False
        self.dim = int(low.size)
        self.shape, self.dtype = tuple(space.shape), space.dtype
        self.low, self.half_range = low, (high - low) / 2.0
        self.low_t = torch.as_tensor(low, dtype=torch.float32, device=device)
        self.half_range_t = torch.as_tensor(self.half_range, dtype=torch.float32, device=device)

    # ------------------------------------------------------------------ acting (numpy)
    def to_env(self, output: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """Greedy env actions for a batch of actor outputs ``(batch, dim)``; ``mask``
        (bool, discrete only) restricts the choice to legal actions."""
        if self.discrete:
            return np.argmax(_masked(output, mask), axis=-1).astype(np.int64) + self.start
        return self._scaled(np.clip(output, -1.0, 1.0))

    def explore(
        self, output: np.ndarray, noise: np.ndarray | None, rng: np.random.Generator,
        mask: np.ndarray | None = None,
    ) -> np.ndarray:
        """Exploring env actions: a Gumbel-max sample (discrete, among the legal actions
        of ``mask``), or the output plus ``noise`` clipped to [-1, 1] (continuous)."""
        if self.discrete:
            gumbel = -np.log(-np.log(rng.uniform(1e-12, 1.0, size=output.shape)))
            return np.argmax(_masked(output + gumbel, mask), axis=-1).astype(np.int64) + self.start
        assert noise is not None
        return self._scaled(np.clip(output + noise, -1.0, 1.0))

    def _scaled(self, normalised: np.ndarray) -> np.ndarray:
        env = self.low + (np.asarray(normalised, dtype=np.float64) + 1.0) * self.half_range
        return env.reshape(len(env), *self.shape).astype(self.dtype, copy=False)

    # ------------------------------------------------------------------ learning (torch)
    def critic_input(self, env_action: torch.Tensor) -> torch.Tensor:
        """Stored env actions ``(batch, ...)`` -> critic actions ``(batch, dim)``."""
        if self.discrete:
            index = env_action.reshape(-1).long() - self.start
            return F.one_hot(index, self.dim).to(torch.float32)
        flat = env_action.reshape(len(env_action), -1).to(torch.float32)
        return ((flat - self.low_t) / self.half_range_t - 1.0).clamp(-1.0, 1.0)

    def policy_action(
        self, output: torch.Tensor, generator: torch.Generator | None, *, sample: bool,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Critic actions of actor outputs. Continuous: the output. Discrete: a one-hot
        straight-through Gumbel-softmax sample when ``sample``, else the argmax one-hot;
        with ``mask`` (bool rows of legal actions) only legal actions are chosen (a row
        without any legal action is left as it is)."""
        if not self.discrete:
            return output
        if mask is not None:
            legal = mask.to(torch.bool)
            legal = legal | ~legal.any(dim=-1, keepdim=True)
            output = output.masked_fill(~legal, torch.finfo(output.dtype).min)
        if not sample:
            return F.one_hot(output.argmax(-1), self.dim).to(output.dtype)
        uniform = torch.rand(output.shape, generator=generator).to(output.device)
        gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-12)))
        soft = torch.softmax(output + gumbel, dim=-1)
        hard = F.one_hot(soft.argmax(-1), self.dim).to(soft.dtype)
        return hard + soft - soft.detach()


def _masked(logits: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Illegal actions (``mask`` False) can never be the argmax; rows without any legal
    action are left as they are."""
    if mask is None:
        return logits
    legal = np.asarray(mask, dtype=bool).reshape(logits.shape)
    legal = legal | ~legal.any(axis=-1, keepdims=True)
    return np.where(legal, logits, -np.inf)
