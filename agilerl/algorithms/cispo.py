"""CISPO: Clipped Importance-Sampling Policy Optimisation.

GRPO's group-relative advantages, but instead of clipping the surrogate (which drops the
gradient of clipped tokens) the importance weight itself is clipped and held constant:
the per-token loss is ``-sg(clip(r, low, high)) * A * log pi``, so every token keeps a
gradient. ``clip_coef`` is one coefficient ``c`` (bounds ``[1 - c, 1 + c]``) or the bounds
``[low, high]`` themselves (e.g. ``[0.8, 2.0]``).
"""

from __future__ import annotations

import torch

from agilerl.algorithms.core.registry import registered
from agilerl.algorithms.grpo import GRPO
from agilerl.models._generated.hyperparameter_attributes import CISPOHyperparameterAttributes


@registered
class CISPO(CISPOHyperparameterAttributes, GRPO):
    """GRPO advantages with clipped, stop-gradient importance-sampling weights."""

    algo = "CISPO"

    def policy_loss(self, logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor,
                    mask: torch.Tensor) -> torch.Tensor:
        low, high = self.clip_bounds()
        weight = torch.clamp(self.ratio(logp, old, mask), low, high).detach()
        return -weight * adv * logp

    def clip_bounds(self) -> tuple[float, float]:
        coef = self.spec.clip_coef
        if isinstance(coef, list | tuple):
            if len(coef) != 2 or not 0 <= float(coef[0]) <= 1 <= float(coef[1]):
                from agilerl.llm.errors import LLMSettingError

                raise LLMSettingError(f"algorithm.clip_coef = {coef!r}: give [low, high] with "
                                 "0 <= low <= 1 <= high")
            return float(coef[0]), float(coef[1])
        return 1.0 - float(coef), 1.0 + float(coef)
