"""Losses of the supervised (SFT) and preference (DPO) fine-tuning algorithms.

Both are functions of a causal LM's ``logits`` over padded rows and a boolean
``response_mask`` (:class:`agilerl.llm.text_batches.TokenBatch`): position ``t`` of the logits
predicts token ``t + 1``, and only response tokens are scored.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = [
    "DPOOutput",
    "dpo_loss",
    "response_log_probs",
    "sft_loss",
    "token_log_probs",
]


def token_log_probs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """``(rows, length - 1)`` log-probabilities of tokens ``1..length-1`` under the logits of
    the positions before them."""
    shifted = logits[:, :-1, :].float()
    targets = input_ids[:, 1:]
    return torch.gather(F.log_softmax(shifted, dim=-1), 2, targets.unsqueeze(-1)).squeeze(-1)


def response_log_probs(logits: torch.Tensor, input_ids: torch.Tensor,
                       response_mask: torch.Tensor) -> torch.Tensor:
    """``(rows,)`` summed log-probability of each row's response tokens."""
    return (token_log_probs(logits, input_ids) * response_mask[:, 1:].float()).sum(dim=-1)


def sft_loss(logits: torch.Tensor, input_ids: torch.Tensor,
             response_mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of the response tokens (prompt and padding ignored)."""
    mask = response_mask[:, 1:].float()
    tokens = mask.sum()
    if tokens == 0:
        raise ValueError("no response tokens to score (every response was cut off or empty)")
    return -(token_log_probs(logits, input_ids) * mask).sum() / tokens


@dataclass(frozen=True)
class DPOOutput:
    """DPO loss and its per-pair implicit rewards ``beta * (log pi - log pi_ref)``."""

    loss: torch.Tensor
    chosen_rewards: torch.Tensor
    rejected_rewards: torch.Tensor

    @property
    def margins(self) -> torch.Tensor:
        return self.chosen_rewards - self.rejected_rewards

    @property
    def accuracy(self) -> float:
        """Fraction of pairs whose chosen response earns the higher implicit reward."""
        return float((self.margins > 0).float().mean())


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
             reference_chosen: torch.Tensor, reference_rejected: torch.Tensor,
             beta: float) -> DPOOutput:
    """Direct Preference Optimisation (Rafailov et al., 2023) over summed response
    log-probabilities ``(pairs,)``: ``-log sigmoid(beta * ((pc - rc) - (pr - rr)))``."""
    chosen = beta * (policy_chosen - reference_chosen)
    rejected = beta * (policy_rejected - reference_rejected)
    loss = -F.logsigmoid(chosen - rejected).mean()
    return DPOOutput(loss=loss, chosen_rewards=chosen.detach(), rejected_rewards=rejected.detach())
