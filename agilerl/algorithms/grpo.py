"""GRPO: Group Relative Policy Optimisation for LLM fine-tuning with LoRA.

For every prompt ``group_size`` completions are sampled; each completion's advantage is its
reward relative to its group (``adv_norm``: ``mean_std`` standardises within the group,
``mean_only`` centres). The policy loss is the clipped surrogate of the per-token importance
ratio (``clip_coef``), plus ``beta`` times KL to the reference policy (the base model
without the adapter). The update itself is shared: :mod:`agilerl.algorithms.core.llm_policy`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from agilerl.algorithms.core.llm_policy import (
    Experience,
    PolicyGradientLLM,
    UpdateBatch,
    finish_advantages,
    group_advantages,
)
from agilerl.algorithms.core.registry import registered
from agilerl.models._generated.hyperparameter_attributes import GRPOHyperparameterAttributes

if TYPE_CHECKING:
    from agilerl.models.algorithms.cispo import CISPOSpec
    from agilerl.models.algorithms.grpo import GRPOSpec
    from agilerl.models.algorithms.gspo import GSPOSpec


@registered
class GRPO(GRPOHyperparameterAttributes, PolicyGradientLLM):
    """Group-relative advantages over ``group_size`` samples, clipped ratio, KL with ``beta``."""

    algo = "GRPO"
    #: ``adv_norm`` values.
    ADV_NORMS: ClassVar[tuple[str, ...]] = ("mean_std", "mean_only", "none")
    spec: GRPOSpec | GSPOSpec | CISPOSpec

    def _build_extra(self) -> None:
        from agilerl.llm.errors import LLMSettingError

        if self.spec.adv_norm not in self.ADV_NORMS:
            raise LLMSettingError(f"algorithm.adv_norm = {self.spec.adv_norm!r}: use one of "
                                 f"{', '.join(self.ADV_NORMS)}")
        self.clip_bounds()  # a malformed clip_coef is named before training

    def token_advantages(self, experience: Experience, batch: UpdateBatch) -> torch.Tensor:
        adv = group_advantages(experience, str(self.spec.adv_norm))
        adv = finish_advantages(adv, self.spec)
        return adv.unsqueeze(1).expand_as(batch.mask).to(batch.mask.device)
