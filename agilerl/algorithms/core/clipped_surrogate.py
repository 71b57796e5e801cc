"""The clipped-surrogate objective of PPO (and of each IPPO unit, and of stacked PPO
members): its loss through autograd, its gradient in closed form, one closed-form gradient
step, and the running means of an update's metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol, TypeVar, cast, overload

import torch

from agilerl.networks.flat_params import FlatTraining
from agilerl.networks.policy_value_gradient import PolicyValueChain

#: A coefficient of the loss: a float (one agent's), or a ``(members, 1)`` tensor column.
C = TypeVar("C", float, torch.Tensor)
C_co = TypeVar("C_co", float, torch.Tensor, covariant=True)


class LossCoefficients(Protocol[C_co]):
    """The loss's coefficients: an agent's hyperparameters (floats), or stacked members'
    as ``(members, 1)`` tensor columns."""

    @property
    def clip_coef(self) -> C_co: ...

    @property
    def vf_coef(self) -> C_co: ...

    @property
    def ent_coef(self) -> C_co: ...


class AgentCoefficients(LossCoefficients[float], Protocol):
    """An agent's loss coefficients and gradient-norm bound."""

    @property
    def max_grad_norm(self) -> float: ...


@overload
def _weighted(hp: AgentCoefficients, policy_loss: float, squared_error: float, entropy: float,
              approx_kl: float, clipfrac: float) -> tuple[float, float, float, float, float,
                                                          float]: ...
@overload
def _weighted(hp: LossCoefficients[C], policy_loss: torch.Tensor, squared_error: torch.Tensor,
              entropy: torch.Tensor, approx_kl: torch.Tensor, clipfrac: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                         torch.Tensor]: ...
def _weighted(hp: LossCoefficients[C], policy_loss: torch.Tensor | float,
              squared_error: torch.Tensor | float, entropy: torch.Tensor | float,
              approx_kl: torch.Tensor | float, clipfrac: torch.Tensor | float
              ) -> tuple[torch.Tensor | float, ...]:
    """The terms of :class:`SurrogateTerms` from the means of :func:`_surrogate` (tensors
    or floats), weighted by ``hp``'s ``vf_coef`` and ``ent_coef``."""
    value_loss = 0.5 * squared_error
    loss = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    return loss, policy_loss, value_loss, entropy, approx_kl, clipfrac


class SurrogateTerms(NamedTuple):
    """The terms of one clipped-surrogate minibatch loss (``loss`` with grad); scalars, or
    one per member of a stacked minibatch."""

    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    approx_kl: torch.Tensor
    clipfrac: torch.Tensor

    def floats(self) -> list[float]:
        """The terms as floats, in field order (one transfer)."""
        return cast(list[float], torch.stack([t.detach() for t in self]).tolist())


class _Surrogate(NamedTuple):
    """The means behind the loss's terms and what its gradient reads."""

    # Over the last dimension, stacked: the policy loss, the squared value error, the
    # entropy, the approximate KL and the clipped fraction (the last two without grad).
    means: torch.Tensor
    ratio: torch.Tensor
    clipped_ratio: torch.Tensor
    unclipped: torch.Tensor  # -A * ratio
    clipped: torch.Tensor  # -A * clamp(ratio, 1 - clip, 1 + clip)
    error: torch.Tensor  # V - R


def _surrogate(hp: LossCoefficients[C], log_prob: torch.Tensor, entropy: torch.Tensor,
               value: torch.Tensor, batch: Mapping[str, torch.Tensor]) -> _Surrogate:
    # On a minibatch of ~100 rows each tensor op costs its call, not its arithmetic: the
    # five means are taken by one reduction over their stacked rows.
    log_ratio = log_prob - batch["log_probs"]
    ratio = log_ratio.exp()
    adv = batch["advantages"]
    if adv.shape[-1] > 1:
        std, mean = torch.std_mean(adv, -1, keepdim=True)
        adv = (adv - mean) / (std + 1e-8)
    clip = hp.clip_coef
    clipped_ratio = ratio.clamp(1 - clip, 1 + clip)
    neg_adv = adv.neg()
    unclipped = neg_adv * ratio
    clipped = neg_adv * clipped_ratio
    error = value - batch["returns"]
    with torch.no_grad():
        ratio_less_one = ratio - 1
        approx_kl = ratio_less_one - log_ratio
        clipped_rows = ratio_less_one.abs_().gt_(clip)  # 1.0 where |ratio - 1| > clip
    means = torch.stack([torch.max(unclipped, clipped), error * error, entropy, approx_kl,
                         clipped_rows]).mean(-1, keepdim=True)
    return _Surrogate(means, ratio, clipped_ratio, unclipped, clipped, error)


def clipped_surrogate_loss(hp: LossCoefficients[C], log_prob: torch.Tensor, entropy: torch.Tensor,
                           value: torch.Tensor, batch: Mapping[str, torch.Tensor]
                           ) -> SurrogateTerms:
    """PPO's loss on a minibatch: the clipped surrogate on normalised advantages, half the
    squared value error and the entropy bonus, weighted by ``hp``'s ``clip_coef``,
    ``vf_coef`` and ``ent_coef``; with the approximate KL to the rollout policy and the
    clipped fraction, without grad. The terms are tensors.

    Means run over the last dimension: ``(rows,)`` tensors give scalar terms;
    ``(members, rows)`` tensors, with ``hp``'s coefficients as ``(members, 1)`` tensors,
    give one term per member.
    """
    means = _surrogate(hp, log_prob, entropy, value, batch).means
    return SurrogateTerms(*(term.squeeze(-1) for term in _weighted(hp, *means)))


def clipped_surrogate_gradient(hp: AgentCoefficients, log_prob: torch.Tensor, entropy: torch.Tensor,
                               value: torch.Tensor, batch: Mapping[str, torch.Tensor]
                               ) -> tuple[list[float], torch.Tensor, float, torch.Tensor]:
    """:func:`clipped_surrogate_loss`'s terms (as floats, in :class:`SurrogateTerms`'s
    order) on a minibatch of rows (``(rows,)`` tensors without grad) and the loss's
    gradient with respect to ``log_prob``, to each row's ``entropy`` (the same for every
    row) and to ``value``, in closed form.

    The surrogate's gradient flows through the ratio (``d ratio / d log_prob = ratio``)
    unless the clipped term is the larger one and the ratio lies outside the clip range
    (where the clamp passes none); where the two terms tie, autograd splits the gradient
    between them, which sums to the same. The value loss gives ``vf_coef * (v - R) / rows``
    and the entropy bonus ``-ent_coef / rows``.
    """
    parts = _surrogate(hp, log_prob, entropy, value, batch)
    rows = log_prob.shape[-1]
    # Inside the clip range the clamp leaves the ratio as it is.
    flows = (parts.unclipped >= parts.clipped) | (parts.clipped_ratio == parts.ratio)
    grad_log_prob = torch.where(flows, parts.unclipped, 0.0).div_(rows)
    grad_value = parts.error.mul(hp.vf_coef / rows)
    terms = list(_weighted(hp, *cast(list[float], parts.means.view(-1).tolist())))
    return terms, grad_log_prob, -hp.ent_coef / rows, grad_value


def closed_form_step(hp: AgentCoefficients, chain: PolicyValueChain, flat: FlatTraining,
                     obs: torch.Tensor, minibatch: Mapping[str, torch.Tensor],
                     legal: torch.Tensor | None = None) -> list[float]:
    """One clipped-PPO gradient step on a minibatch without autograd: the network's
    outputs through ``chain``, the loss's gradient in closed form
    (:func:`clipped_surrogate_gradient`) carried back into ``flat``'s gradient buffer,
    clipped to ``hp.max_grad_norm`` and applied by one fused Adam step. ``legal``: the
    discrete actions a row may take (the others' logits are set to the dtype's minimum,
    as the acting path sets them, and receive no gradient). Returns the loss's terms as
    floats, in :class:`SurrogateTerms`'s order."""
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

    KEYS = SurrogateTerms._fields

    def __init__(self) -> None:
        self.sums = dict.fromkeys(self.KEYS, 0.0)
        self.updates = 0

    def add(self, **values: float) -> None:
        for key, val in values.items():
            self.sums[key] += val
        self.updates += 1

    def means(self) -> dict[str, float]:
        return {k: v / max(self.updates, 1) for k, v in self.sums.items()}
