"""One agent's actions for a MADDPG-style multi-agent policy (MADDPG, MATD3).

An actor's output is a vector of ``dim`` numbers; what it means depends on the space:

* ``Box`` (bounded): a normalised action in [-1, 1] per dimension (the actor's bounded
  output), mapped affinely onto the space's bounds for the environment. Exploration adds
  the agent's OU or Gaussian noise (:mod:`agilerl.algorithms.core.action_noise`) in
  normalised units and clips. Critics read the normalised action.
* ``Discrete(n)``: ``n`` logits, and the policy is their Gumbel-softmax relaxation (Jang
  et al. 2017, as in MADDPG's original implementation): an action vector
  ``a = softmax(logits + g)`` on the simplex, ``g`` standard Gumbel noise, temperature 1.
  The environment gets ``argmax(a)``, which is a draw from ``softmax(logits)``: the policy
  is stochastic, and so is acting without exploration (the policy the critics were
  optimised for; the argmax of the logits is a different, untrained policy). Exploration
  adds the agent's noise to ``a`` and clips it to [0, 1]. Critics read action vectors:
  replay memory stores ``a`` itself, target actions are the target policy's relaxed
  samples, and the actor's loss differentiates through its relaxed sample. (With one-hot
  critic inputs and a straight-through gradient, a critic's gradient is an extrapolation
  off the vertices it was trained on; on speaker-listener actors then grew confident in
  bad moves: ``docs/training.md`` has the measurements.)

:meth:`AgentActions.critic_input` turns a stored batch into what critics read (a stored
index, from a loop that kept env actions, becomes a one-hot vector).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces

from agilerl.core.spaces import IncompatibleSpaceError
from agilerl.core.value_types import Space


class AgentActions:
    """Action encoding of one agent's action space (see module docs)."""

    def __init__(self, space: Space, agent: str, device: torch.device) -> None:
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
    def act(
        self, output: np.ndarray, noise: np.ndarray | None, rng: np.random.Generator,
        mask: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Env actions and the action vectors critics read (what replay memory stores)
        for a batch of actor outputs ``(batch, dim)``. ``noise`` (exploration, in the
        action vector's units) is added and clipped; ``mask`` (bool, discrete only)
        restricts the choice to legal actions. Continuous agents draw nothing from
        ``rng`` and act deterministically without noise."""
        if not self.discrete:
            vector = output if noise is None else output + noise
            env = self._scaled(np.clip(vector, -1.0, 1.0))
            return env, env
        legal = _legal(mask, output.shape)
        gumbel = -np.log(-np.log(rng.uniform(1e-12, 1.0, size=output.shape)))
        logits = np.where(legal, output + gumbel, -np.inf)
        vector = np.exp(logits - logits.max(axis=-1, keepdims=True))
        vector /= vector.sum(axis=-1, keepdims=True)
        if noise is not None:
            vector = np.where(legal, np.clip(vector + noise, 0.0, 1.0), 0.0)
        chosen = np.argmax(np.where(legal, vector, -np.inf), axis=-1)
        return chosen.astype(np.int64) + self.start, vector.astype(np.float32)

    def _scaled(self, normalised: np.ndarray) -> np.ndarray:
        env = self.low + (np.asarray(normalised, dtype=np.float64) + 1.0) * self.half_range
        return env.reshape(len(env), *self.shape).astype(self.dtype, copy=False)

    # ------------------------------------------------------------------ learning (torch)
    def critic_input(self, stored: torch.Tensor) -> torch.Tensor:
        """Stored actions ``(batch, ...)`` -> critic actions ``(batch, dim)``: a discrete
        agent's stored vectors as they are (a stored integer index becomes its one-hot
        vector), a continuous agent's env actions normalised back to [-1, 1]."""
        if self.discrete:
            if stored.is_floating_point():
                return stored.reshape(len(stored), self.dim).to(torch.float32)
            index = stored.reshape(-1).long() - self.start
            return F.one_hot(index, self.dim).to(torch.float32)
        flat = stored.reshape(len(stored), -1).to(torch.float32)
        return ((flat - self.low_t) / self.half_range_t - 1.0).clamp(-1.0, 1.0)

    def policy_action(
        self, output: torch.Tensor, generator: torch.Generator | None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Critic actions of actor outputs, differentiable in them. Continuous: the output.
        Discrete: a relaxed (Gumbel-softmax) sample; with ``mask`` (bool rows of legal
        actions) illegal actions get probability 0 (a row without any legal action is
        left as it is)."""
        if not self.discrete:
            return output
        if mask is not None:
            legal = mask.to(torch.bool)
            legal = legal | ~legal.any(dim=-1, keepdim=True)
            output = output.masked_fill(~legal, torch.finfo(output.dtype).min)
        uniform = torch.rand(output.shape, generator=generator).to(output.device)
        gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-12)))
        return torch.softmax(output + gumbel, dim=-1)


def _legal(mask: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    """Bool rows of legal actions; rows without any legal action allow every action."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    legal = np.asarray(mask, dtype=bool).reshape(shape)
    return legal | ~legal.any(axis=-1, keepdims=True)
