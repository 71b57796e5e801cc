"""LLMPPO: PPO with a learned critic for LLM fine-tuning with LoRA.

The critic is a linear value head on the adapted model's last hidden state, trained with
its own learning rate (``lr_critic``; the adapter uses ``lr_actor``). Each completion's
reward is given at its last token; advantages are GAE over the completion's tokens
(``gamma``, ``gae_lambda``) from the values before the update, whitened across the batch
(``whiten_advantages``). The loss is the clipped surrogate (``clip_coef``) plus
``vf_coef`` times the clipped value loss, plus ``beta`` times KL to the reference policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from agilerl.algorithms.core.llm_policy import (
    Experience,
    PolicyGradientLLM,
    UpdateBatch,
    finish_advantages,
)
from agilerl.algorithms.core.registry import registered
from agilerl.models._generated.hyperparameter_attributes import LLMPPOHyperparameterAttributes

if TYPE_CHECKING:
    from agilerl.models.algorithms.llmppo import LLMPPOSpec


def token_gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
              lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)`` of each completion token: ``rewards`` (one per row) arrive
    at the row's last counted token; the value after it is 0."""
    rows, steps = mask.shape
    last = (mask.sum(dim=1).long() - 1).clamp(min=0)
    token_rewards = torch.zeros_like(values)
    token_rewards[torch.arange(rows), last] = rewards
    adv = torch.zeros_like(values)
    running = torch.zeros(rows, dtype=values.dtype, device=values.device)
    for t in reversed(range(steps)):
        next_value = values[:, t + 1] * mask[:, t + 1] if t + 1 < steps else 0.0
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        running = (delta + gamma * lam * running) * mask[:, t]
        adv[:, t] = running
    return adv, adv + values


@registered
class LLMPPO(LLMPPOHyperparameterAttributes, PolicyGradientLLM):
    """Clipped PPO over completion tokens with a value head (see module docstring)."""

    algo = "LLMPPO"
    lr_names: ClassVar[tuple[str, ...]] = ("lr_actor", "lr_critic")
    spec: LLMPPOSpec

    def _build_extra(self) -> None:
        head = torch.nn.Linear(self.base.hidden_size, 1).to(self.device)
        torch.nn.init.zeros_(head.weight)
        torch.nn.init.zeros_(head.bias)
        self.extra_modules["value_head"] = head

    def _extra_param_groups(self) -> list[dict[str, object]]:
        lr = self.lr_critic if self.lr_critic is not None else self.lr_actor
        return [{"params": list(self.extra_modules["value_head"].parameters()),
                 "lr": float(lr), "lr_name": "lr_critic"}]

    def wants_hidden(self) -> bool:
        return True

    def value_of(self, hidden: torch.Tensor) -> torch.Tensor:
        head = self.extra_modules["value_head"]
        return head(hidden.float()).squeeze(-1)

    @torch.no_grad()
    def values(self, batch: UpdateBatch) -> torch.Tensor:
        """Values of every completion token before the update."""
        rollout = batch.rollout
        size = self.chunk_size(rollout.ids.shape[0])
        parts = []
        with self.base.use(self.adapter) as model:
            for s in range(0, rollout.ids.shape[0], size):
                _, hidden = self.forward_logprobs(model, rollout.ids[s:s + size],
                                                  rollout.attention_mask[s:s + size],
                                                  rollout.prompt_len, hidden=True)
                assert hidden is not None  # asked for
                parts.append(self.value_of(hidden))
        return torch.cat(parts)

    def token_advantages(self, experience: Experience, batch: UpdateBatch) -> torch.Tensor:
        rewards = torch.as_tensor(np.asarray(experience.rewards, dtype=np.float64)).float()
        values = self.values(batch) * batch.mask
        adv, returns = token_gae(rewards.to(values.device), values, batch.mask,
                                 float(self.gamma), float(self.gae_lambda))
        batch.old_values, batch.returns = values, returns
        if self.spec.whiten_advantages:
            flat = adv[batch.mask.bool()]
            if flat.numel() > 1:
                adv = (adv - flat.mean()) / (flat.std() + 1e-8) * batch.mask
        spec = self.spec.model_copy(update={"whiten_advantages": False})
        return finish_advantages(adv, spec)

    def value_loss(self, batch: UpdateBatch, rows: torch.Tensor,
                   values: torch.Tensor | None) -> torch.Tensor | float:
        if values is None or batch.returns is None or batch.old_values is None:
            return 0.0
        mask = batch.mask[rows]
        old, returns = batch.old_values[rows], batch.returns[rows]
        coef = float(self.clip_coef)
        clipped = old + torch.clamp(values - old, -coef, coef)
        loss = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
        per_row = (loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return 0.5 * float(self.vf_coef) * per_row.mean()
