"""Drawing a stochastic policy's actions with their log-probabilities (PPO and IPPO).

On the few rows of a vector step, the cost of acting is the per-call overhead of each
tensor operation, not its arithmetic: these draw an action per row with the fewest calls,
and give the log-probability exactly as the update evaluates it (the same ``log_softmax``
as :func:`~agilerl.networks.actor_critic.categorical_terms`, so the ratio of the first
minibatch is 1 for a policy that has not moved yet).
"""

from __future__ import annotations

import numpy as np
import torch

from agilerl.networks.policy_value_gradient import LOG_SQRT_2PI


def categorical_action(logits: torch.Tensor, mode: bool, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
    """An action drawn from ``Categorical(logits)`` per row (with ``mode``: the argmax)
    and its log-probability. Drawn in numpy, by inverting the row's cumulative
    distribution at a uniform draw from ``rng``: on a few rows, torch's ``multinomial``
    costs more than all the rest of the sampling. Actions of probability zero (logits at
    the dtype's minimum: masked) are never drawn."""
    log_pmf = torch.log_softmax(logits, dim=-1).cpu().numpy()
    if mode:
        action = log_pmf.argmax(axis=-1)
    else:
        cdf = np.exp(log_pmf).cumsum(axis=-1)
        u = rng.random(len(cdf)) * cdf[:, -1]  # below the row's total: a valid index
        action = (cdf < u[:, None]).sum(axis=-1)
    log_prob = log_pmf[np.arange(len(action)), action]  # take_along_axis costs 5x more
    return action.astype(np.int64), log_prob.astype(np.float32)


def gaussian_action(mean: torch.Tensor, log_std: torch.Tensor, mode: bool,
                    generator: torch.Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """A sample of ``Normal(mean, exp(log_std))`` per row (with ``mode``: ``mean``) and its
    log-density summed over action dimensions: ``Normal.log_prob``'s formula, without
    building the distribution, which validates its arguments at every call."""
    std = log_std.detach().exp()
    if mode:
        action = mean
    else:
        noise = torch.randn(mean.shape, generator=generator)
        action = mean + std * noise.to(mean.device)
    log_prob = (-((action - mean) ** 2) / (2 * std.square()) - std.log()
                - LOG_SQRT_2PI).sum(-1)
    return action.cpu().numpy(), log_prob.cpu().numpy()
