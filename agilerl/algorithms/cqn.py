"""Conservative Q-Network (CQN): DQN trained on a fixed dataset with the CQL regulariser.

Loss per batch: ``0.5 * mean((Q(s, a) - y)^2) + cql_alpha * mean(logsumexp_a' Q(s, a') -
Q(s, a))``, with ``y`` the (double) DQN target of :meth:`DQN.td_terms`; the gradient norm is
clipped to 1 and the target network follows by ``tau`` after each update. The regulariser
pushes down the Q-values of actions the dataset does not take, so the greedy policy stays
near the data instead of exploiting the Q-function's errors on unseen actions.

The reference subtracts the mean over *all* actions (``mean_a' Q(s, a')``) instead of the
dataset action's value; that term does not depend on the data, so it only flattens the
Q-function. The dataset action is the CQL(H) form of Kumar et al. (2020).
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F

from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.dqn import DQN
from agilerl.models._generated.hyperparameter_attributes import CQNHyperparameterAttributes


@registered
class CQN(CQNHyperparameterAttributes, DQN):
    """CQN for discrete action spaces (offline: trained by the ``offline`` loop)."""

    algo = "CQN"
    unsupported_settings: ClassVar[dict[str, str]] = {}
    loss_metric_names: ClassVar[tuple[str, ...]] = ("loss", "td_loss", "cql_loss")
    grad_norm_clip: ClassVar[float | None] = 1.0  # as the reference

    def loss_terms(self, q_all: torch.Tensor, q: torch.Tensor, target: torch.Tensor
                   ) -> dict[str, torch.Tensor]:
        """``0.5 * td_loss + cql_alpha * cql_loss`` and its two terms, through autograd."""
        td_loss = F.mse_loss(q, target)
        cql = (torch.logsumexp(q_all, dim=-1) - q).mean()
        return {"loss": 0.5 * td_loss + self.cql_alpha * cql, "td_loss": td_loss,
                "cql_loss": cql}

    def loss_and_grad(self, q_all: torch.Tensor, action: torch.Tensor, target: torch.Tensor
                      ) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
        """The loss terms ``(loss, td_loss, cql)`` and the loss's gradient with respect to
        ``Q(s, .)``.

        With ``N`` rows, ``p = softmax(Q(s, .))`` and ``delta = Q(s, a) - y``, that gradient
        is ``(cql_alpha * p + onehot(a) * (delta - cql_alpha)) / N``; the CQL term
        ``logsumexp_a' Q(s, a') - Q(s, a)`` is ``-log p(a)``.
        """
        rows, alpha = target.shape[0], float(self.cql_alpha)
        log_p = torch.log_softmax(q_all, dim=-1)
        delta = q_all.gather(1, action).squeeze(1).sub_(target)
        td_loss = torch.dot(delta, delta).div_(rows)
        cql = log_p.gather(1, action).mean().neg_()
        loss = torch.add(cql.mul(alpha), td_loss, alpha=0.5)
        grad = log_p.exp_().mul_(alpha / rows)
        grad.scatter_add_(1, action, delta.sub_(alpha).mul_(1.0 / rows).unsqueeze(1))
        return (loss, td_loss, cql), grad
