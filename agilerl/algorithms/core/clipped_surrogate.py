"""The clipped-surrogate objective of PPO (and of each IPPO unit, and of stacked PPO
members): its loss through autograd, its gradient in closed form, one closed-form gradient
step, and the running means of an update's metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.policy_value_gradient import PolicyValueChain


class SurrogateTerms(NamedTuple):
    """The terms of one clipped-surrogate minibatch loss (``loss`` with grad); scalars, or
    one per member of a stacked minibatch."""

    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clipfrac: torch.Tensor


class _Surrogate(NamedTuple):
    """The loss's terms and what its gradient reads."""

    terms: SurrogateTerms
    ratio: torch.Tensor
    unclipped: torch.Tensor  # -A * ratio
    clipped: torch.Tensor  # -A * clamp(ratio, 1 - clip, 1 + clip)
    error: torch.Tensor  # V - R


def _surrogate(hp: Any, log_prob: torch.Tensor, entropy: torch.Tensor, value: torch.Tensor,
               batch: Mapping[str, torch.Tensor]) -> _Surrogate:
    log_ratio = log_prob - batch["log_probs"]
    ratio = log_ratio.exp()
    adv = batch["advantages"]
    if adv.shape[-1] > 1:
        adv = (adv - adv.mean(-1, keepdim=True)) / (adv.std(-1, keepdim=True) + 1e-8)
    clip = hp.clip_coef
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - clip, 1 + clip)
    pg_loss = torch.max(unclipped, clipped).mean(-1, True)
    error = value - batch["returns"]
    value_loss = 0.5 * error.pow(2).mean(-1, True)
    entropy_mean = entropy.mean(-1, True)
    loss = pg_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy_mean
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean(-1, True)
        clipfrac = ((ratio - 1.0).abs() > clip).float().mean(-1, True)
    terms = SurrogateTerms(*(term.squeeze(-1) for term in (
        loss, pg_loss, value_loss, entropy_mean, approx_kl, clipfrac)))
    return _Surrogate(terms, ratio, unclipped, clipped, error)


def clipped_surrogate_loss(hp: Any, log_prob: torch.Tensor, entropy: torch.Tensor,
                           value: torch.Tensor, batch: Mapping[str, torch.Tensor]
                           ) -> SurrogateTerms:
    """PPO's loss on a minibatch: the clipped surrogate on normalised advantages, half the
    squared value error and the entropy bonus, weighted by ``hp``'s ``clip_coef``,
    ``vf_coef`` and ``ent_coef`` (PPO, each IPPO unit, and stacked PPO members); with the
    approximate KL to the rollout policy and the clipped fraction, without grad.

    Means run over the last dimension: ``(rows,)`` tensors give scalar terms;
    ``(members, rows)`` tensors, with ``hp``'s coefficients as ``(members, 1)`` tensors,
    give one term per member.
    """
    return _surrogate(hp, log_prob, entropy, value, batch).terms


def clipped_surrogate_gradient(hp: Any, log_prob: torch.Tensor, entropy: torch.Tensor,
                               value: torch.Tensor, batch: Mapping[str, torch.Tensor]
                               ) -> tuple[SurrogateTerms, torch.Tensor, torch.Tensor,
                                          torch.Tensor]:
    """:func:`clipped_surrogate_loss`'s terms on a minibatch of rows (``(rows,)`` tensors
    without grad) and the loss's gradient with respect to ``log_prob``, ``entropy`` and
    ``value``, in closed form.

    The surrogate's gradient flows through the ratio (``d ratio / d log_prob = ratio``)
    unless the clipped term is the larger one and the ratio lies outside the clip range
    (where the clamp passes none); where the two terms tie, autograd splits the gradient
    between them, which sums to the same. The value loss gives ``vf_coef * (v - R) / rows``
    and the entropy bonus ``-ent_coef / rows``.
    """
    parts = _surrogate(hp, log_prob, entropy, value, batch)
    rows = log_prob.shape[-1]
    clip = hp.clip_coef
    ratio, unclipped = parts.ratio, parts.unclipped
    flows = (ratio >= 1 - clip) & (ratio <= 1 + clip) | (unclipped >= parts.clipped)
    grad_log_prob = torch.where(flows, unclipped, 0.0).div_(rows)
    grad_entropy = torch.full_like(entropy, -hp.ent_coef / rows)
    grad_value = parts.error.mul(hp.vf_coef / rows)
    return parts.terms, grad_log_prob, grad_entropy, grad_value


def closed_form_step(hp: Any, chain: PolicyValueChain, flat: FlatTraining, obs: torch.Tensor,
                     minibatch: Mapping[str, torch.Tensor],
                     legal: torch.Tensor | None = None) -> SurrogateTerms:
    """One clipped-PPO gradient step on a minibatch without autograd: the network's
    outputs through ``chain``, the loss's gradient in closed form
    (:func:`clipped_surrogate_gradient`) carried back into ``flat``'s gradient buffer,
    clipped to ``hp.max_grad_norm`` and applied by one fused Adam step. ``legal``: the
    discrete actions a row may take (the others' logits are set to the dtype's minimum,
    as the acting path sets them, and receive no gradient). Returns the loss's terms."""
    actions = minibatch["actions"]
    tapes = chain.tapes()
    policy_out, value = chain.run(obs, tapes)
    if legal is not None:
        policy_out = policy_out.masked_fill(~legal, torch.finfo(policy_out.dtype).min)
    evaluation = chain.log_prob_entropy(policy_out, actions)
    terms, grad_log_prob, grad_entropy, grad_value = clipped_surrogate_gradient(
        hp, evaluation.log_prob, evaluation.entropy, value, minibatch)
    grad_policy, grad_log_std = chain.policy_gradient(evaluation, actions, grad_log_prob,
                                                      grad_entropy)
    if legal is not None:
        grad_policy.masked_fill_(~legal, 0.0)
    chain.backward_into(tapes, grad_policy, grad_value, flat.grad_views, grad_log_std)
    flat.clip_grad_norm(hp.max_grad_norm)
    flat.adam_step()
    return terms


class UpdateStats:
    """Running means of the update's metrics over minibatches."""

    KEYS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")

    def __init__(self) -> None:
        self.sums = dict.fromkeys(self.KEYS, 0.0)
        self.updates = 0

    def add(self, **values: float) -> None:
        for key, val in values.items():
            self.sums[key] += val
        self.updates += 1

    def means(self) -> dict[str, float]:
        return {k: v / max(self.updates, 1) for k, v in self.sums.items()}
