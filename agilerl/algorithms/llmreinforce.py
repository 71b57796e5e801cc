"""LLMREINFORCE: REINFORCE with Return Batch Normalisation for LLM fine-tuning with LoRA.

One completion per prompt; each row's reward is normalised across the whole batch
(ReBN: ``(R - mean) / std``), and the policy loss is the clipped surrogate of the
importance ratio (``clip_coef``; ``importance_sampling_level`` token by default, or the
whole completion), plus ``beta`` times KL to the reference policy. In multi-turn
environments a turn is credited with its return-to-go discounted by ``gamma``.
"""

from __future__ import annotations

import numpy as np
import torch

from agilerl.algorithms.core.llm_policy import Experience, PolicyGradientLLM, UpdateBatch
from agilerl.algorithms.core.registry import registered
from agilerl.models._generated.hyperparameter_attributes import LLMREINFORCEHyperparameterAttributes


@registered
class LLMREINFORCE(LLMREINFORCEHyperparameterAttributes, PolicyGradientLLM):
    """Batch-normalised returns as advantages, clipped ratio, KL with ``beta``."""

    algo = "LLMREINFORCE"

    def token_advantages(self, experience: Experience, batch: UpdateBatch) -> torch.Tensor:
        rewards = torch.as_tensor(np.asarray(experience.rewards, dtype=np.float64)).float()
        adv = rewards - rewards.mean()
        if rewards.numel() > 1:
            adv = adv / (rewards.std() + 1e-4)
        return adv.unsqueeze(1).expand_as(batch.mask).to(batch.mask.device)
